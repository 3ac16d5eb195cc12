"""A refresh launched from a template holds ROOT's lease in its job (pipeline.job_lease): the job
that the template stages, run as staged (its pipeline proto, on the FnApiRunner), on the GCS
emulator behind a proxy that enforces preconditions as GCS does (tests.fault_proxy). A hand run
and a scheduled one never both publish, a hand run never removes a running job's version, and a
lease a killed job left is taken over once stale."""

from __future__ import annotations

import dataclasses
import datetime
import shutil
import threading
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms import environments

from core import storage
from core.contract.layout import MANIFEST_NAME
from core.contract.versions import LATEST_NAME
from pipeline.job_lease import JobLease
from pipeline.lease import LEASE_NAME, Holder, Lease, LeaseHeldError
from pipeline.version_store import VersionPublication, latest_version
from tests.fault_proxy import FaultProxy
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline
from tests.test_dataflow import REPO, _publication, small_input, stage_template

LEASE_SECONDS = 3  # the least a run may set is 2: renewals every second


@pytest.fixture
def gcs(gcs_emulator, gcs_bucket, tmp_path):
    """(emulator, bucket, ROOT, refresh argv): an input of 6 images in the bucket, every gs:// request
    of this process and its children through the enforcing proxy."""
    gcs_emulator.upload_dir(small_input(tmp_path / "in", per_class=2), f"gs://{gcs_bucket}/raw")
    root = f"gs://{gcs_bucket}/datasets/shapes"
    argv = ["refresh", "--input", f"gs://{gcs_bucket}/raw", "--output", root, "--lease_seconds", str(LEASE_SECONDS)]
    with FaultProxy(gcs_emulator.url, kinds=(), preconditions=True) as proxy, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        yield gcs_emulator, gcs_bucket, root, argv


def staged_job(gcs, name: str, *flags: str):
    """The pipeline proto a template launch of the refresh stages, and its publication."""
    emulator, bucket, _, argv = gcs
    _, proto = stage_template(emulator, bucket, [*argv, *flags], name)
    return proto, _publication(proto)


def run_staged(proto) -> None:
    """Runs the staged job's graph as it is, on the FnApiRunner: only its worker environment (the
    Dataflow worker image) becomes this process."""
    for environment in proto.components.environments.values():
        environment.CopyFrom(environments.EmbeddedPythonEnvironment.default().to_runner_api(None))
    FnApiRunner().run_via_runner_api(proto, PipelineOptions([])).wait_until_finish()


def holder(root: str) -> Holder | None:
    current = storage.read_with_token(f"{root}/{LEASE_NAME}")
    return Holder.from_bytes(current[0]) if current else None


def listing(emulator, root: str) -> dict[str, int]:
    return {blob.name: blob.generation for blob in emulator.list_blobs(root + "/")}


class PausedPublish:
    """Holds the job at its publish step (its shards written and read back) until `go`."""

    def __init__(self, monkeypatch):
        self.reached, self._go = threading.Event(), threading.Event()
        original = VersionPublication.publish

        def paused(publication, *args, **kwargs):
            self.reached.set()
            assert self._go.wait(120), "the test never let the job publish"
            return original(publication, *args, **kwargs)

        monkeypatch.setattr(VersionPublication, "publish", paused)

    def go(self) -> None:
        self._go.set()


def paused_at_publish(gcs, name: str, monkeypatch):
    """A staged job run in the background until its publish step, which waits for `pause.go()`:
    its publication, the pause, its thread and the errors it raised."""
    proto, publication = staged_job(gcs, name)
    pause = PausedPublish(monkeypatch)
    thread, errors = in_background(proto)
    assert pause.reached.wait(300), errors
    return publication, pause, thread, errors


def in_background(proto) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def job():
        try:
            run_staged(proto)
        except BaseException as e:  # the test thread asserts on it
            errors.append(e)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    return thread, errors


def kind_flags(gcs, kind: str) -> list[str]:
    """The flags that make the fixture's refresh one of `kind`, its input put in the bucket."""
    emulator, bucket, _, _ = gcs
    if kind == "csv":
        emulator.upload_dir(REPO / "sample" / "tabular", f"gs://{bucket}/tables")
        return ["--kind", "csv", "--input", f"gs://{bucket}/tables/*.csv*"]
    if kind == "image_csv":
        images = [uri.removeprefix(f"gs://{bucket}/") for uri in emulator.list_uris(f"gs://{bucket}/raw/")]
        rows = "".join(f"{name},{name.split('/')[1]}\n" for name in images)
        emulator.upload_bytes(f"gs://{bucket}/labels.csv", f"image_uri,label\n{rows}".encode())
        return ["--kind", "image_csv", "--input", f"gs://{bucket}/labels.csv"]
    return []


@pytest.mark.parametrize(
    "kind, first_step", [("images", "ListClassFolders"), ("image_csv", "ReadImageCsv"), ("csv", "ListCsvFiles")]
)
def test_the_staged_job_takes_the_lease_before_any_step_that_writes(gcs, kind, first_step):
    proto, publication = staged_job(gcs, kind, *kind_flags(gcs, kind))
    assert publication.job_lease == JobLease(gcs[2], publication.run, LEASE_SECONDS)
    transforms = {t.unique_name: t for t in proto.components.transforms.values()}
    # The step where everything the job writes begins starts from the lease's element only.
    assert set(transforms[first_step].inputs.values()) == set(transforms["TakeLease"].outputs.values())
    assert "ReleaseLease" in transforms


def test_a_template_job_alone_takes_renews_and_releases_the_lease_and_publishes(gcs, monkeypatch):
    emulator, _, root, _ = gcs
    publication, pause, thread, errors = paused_at_publish(gcs, "alone", monkeypatch)
    first = holder(root)
    assert first is not None and first.run == publication.run
    time.sleep(2 * LEASE_SECONDS)  # past the lease it took: only renewals keep it
    renewed = holder(root)
    assert renewed is not None and renewed.run == publication.run
    assert datetime.datetime.fromisoformat(renewed.expires) > datetime.datetime.fromisoformat(first.expires)
    pause.go()
    thread.join(300)
    assert not errors and not thread.is_alive()
    assert latest_version(root) == publication.version
    assert holder(root) is None, "released when the job ended"
    assert f"{publication.folder}/{MANIFEST_NAME}" in emulator.list_uris(root + "/")


def test_a_rejected_template_job_fails_and_releases_the_lease(gcs):
    emulator, bucket, root, _ = gcs
    emulator.upload_bytes(f"gs://{bucket}/raw/circle/broken.png", b"no image")
    proto, publication = staged_job(gcs, "rejected", "--max_error_fraction", "0")
    with pytest.raises(Exception, match="not published"):
        run_staged(proto)
    assert publication.rejected() is not None and latest_version(root) is None
    assert holder(root) is None, "released as the job failed with its outcome"


def test_a_held_template_job_fails_and_releases_the_lease(gcs, tmp_path):
    emulator, bucket, root, _ = gcs
    proto, first = staged_job(gcs, "first")
    run_staged(proto)
    fewer = small_input(tmp_path / "fewer", per_class=2)
    shutil.rmtree(fewer / "circle")
    emulator.upload_dir(fewer, f"gs://{bucket}/fewer")
    proto, publication = staged_job(gcs, "held", "--input", f"gs://{bucket}/fewer")
    with pytest.raises(Exception, match="held"):
        run_staged(proto)
    assert f"{publication.folder}/{MANIFEST_NAME}" in emulator.list_uris(root + "/")
    assert latest_version(root) == first.version
    assert holder(root) is None, "released as the job failed with its outcome"


def test_a_template_job_whose_root_a_live_hand_run_holds_fails_and_writes_nothing(gcs):
    emulator, bucket, root, _ = gcs
    proto, first = staged_job(gcs, "first")
    run_staged(proto)
    emulator.upload_bytes(f"gs://{bucket}/raw/circle/new.jpg", (REPO / "sample/images/circle/0003.jpg").read_bytes())
    proto, _ = staged_job(gcs, "refused")  # a new input: a new version to publish
    hand = Lease(root, "hand-run")
    hand.acquire()
    before = listing(emulator, root)
    with pytest.raises(Exception) as failed:
        run_staged(proto)
    line = str(failed.value).strip().splitlines()[0]
    assert f"{root}/{LEASE_NAME}" in line and "run hand-run" in line, line
    assert listing(emulator, root) == before, "the job wrote nothing"
    assert latest_version(root) == first.version and holder(root).run == "hand-run"
    hand.release()


def test_a_hand_run_while_a_template_job_holds_the_lease_is_refused_and_leaves_its_version(gcs, monkeypatch):
    emulator, bucket, root, argv = gcs
    publication, pause, thread, errors = paused_at_publish(gcs, "busy", monkeypatch)
    written = listing(emulator, f"{root}/{publication.version}")
    assert written, "the job's shards are in its version folder, which has no manifest yet"

    hand = run_pipeline(argv)
    assert hand.returncode == 2, hand.stderr
    line = the_one_line(hand.stderr)
    assert f"{root}/{LEASE_NAME}" in line and f"run {publication.run}" in line, line
    assert listing(emulator, f"{root}/{publication.version}") == written, "the running job's version is left whole"

    pause.go()
    thread.join(300)
    assert not errors and latest_version(root) == publication.version and holder(root) is None


def test_a_lease_a_killed_job_left_is_taken_over_once_stale(gcs):
    emulator, _, root, _ = gcs
    proto, publication = staged_job(gcs, "killed")
    path = f"{root}/{LEASE_NAME}"
    started = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=LEASE_SECONDS)
    # What a job killed on another host leaves: its worker's last renewal, until it expires.
    left = Holder.this_process("killed-run", started, 300)
    left = Holder(left.run, "dataflow-worker-0", 4242, left.started, left.expires)
    token = storage.create_exclusive(path, left.to_bytes())
    staged = listing(emulator, publication.folder)  # what the launcher wrote: the version's sources file
    with pytest.raises(Exception, match="run killed-run"):  # not expired yet: refused
        run_staged(proto)
    assert listing(emulator, publication.folder) == staged and latest_version(root) is None

    expired = Holder.this_process("killed-run", started, LEASE_SECONDS)  # as it is once `lease_seconds` passed
    assert storage.replace_if_unchanged(path, dataclasses.replace(left, expires=expired.expires).to_bytes(), token)
    run_staged(proto)  # the same job, launched again
    assert latest_version(root) == publication.version and holder(root) is None
    assert f"{root}/{LATEST_NAME}" in emulator.list_uris(root + "/")


def test_a_step_run_again_finds_the_lease_its_own_and_another_run_is_refused(gcs):
    """A runner retries a bundle that took the lease: the step takes it again; the lease stays one
    run's, and a release by any worker of the job ends it."""
    root = gcs[2]
    job, again, other = (JobLease(root, run, LEASE_SECONDS) for run in ("job-run", "job-run", "other-run"))
    job.take()
    again.take()
    with pytest.raises(LeaseHeldError) as refused:
        other.take()
    assert str(refused.value).count("\n") == 0 and f"{root}/{LEASE_NAME}" in str(refused.value)
    assert "run job-run" in str(refused.value) and holder(root).run == "job-run"
    other.release()  # not its lease: left alone
    assert holder(root).run == "job-run"
    again.release()
    assert holder(root) is None
