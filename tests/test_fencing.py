"""A run that lost its lease cannot touch the dataset (pipeline.lease.Fence), wherever it stalled.

Run A stalls at a generated point of its commit (any call it makes into core.storage), its
lease expires, and run B tries to take over and commit. Whatever the point: the folder ends with
one whole dataset (A's or B's), nothing of the other run, and a run that lost the lease raised
LeaseLost having touched nothing. Locally a stall inside A's fence holds the folder's lock, so B
cannot take over until A is done; on GCS every write of a committed name is a compose that names
the lease, which GCS refuses once B holds it (tested against a server that enforces preconditions:
tests.fault_proxy's precondition mode in front of the emulator).
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core import storage
from core.contract.layout import MANIFEST_NAME
from core.contract.versions import new_run
from pipeline.cli import main
from pipeline.folder_store import FolderPublication, referenced
from pipeline.lease import LEASE_NAME, Lease, LeaseHeldError, LeaseLost
from pipeline.output import prepare_output
from tests.dataset_reader import load_manifest
from tests.fault_proxy import FaultProxy
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from tests.test_publication import REPO, convert_argv, photos, whole_dataset

RUN_A, RUN_B = new_run(), new_run()  # run names as runs have them: their staging folders are runs' by name
# What a stalled run calls in core.storage while it commits (and B while it takes over).
_STORAGE_CALLS = (
    "read_text",
    "read_with_token",
    "folder_lock",
    "commit_copy",
    "commit_write",
    "write_atomically",
    "delete",
    "children",
    "files_below",
    "copy",
)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """Two committed datasets of different sizes, whose files the runs A and B stage."""
    base = tmp_path_factory.mktemp("fencing")
    made = {}
    for name, per_class in (("old", 1), ("a", 2), ("b", 3)):
        out = base / name
        assert main(convert_argv(photos(base / f"src-{name}", per_class), out)) == 0
        made[name] = out
    return made


class Stall:
    """Stops one thread at its n-th call into core.storage until released."""

    def __init__(self, monkeypatch, at: int):
        self.at, self.calls, self.thread = at, 0, None
        self.stalled, self.release = threading.Event(), threading.Event()
        for name in _STORAGE_CALLS:
            monkeypatch.setattr(storage, name, self._wrap(getattr(storage, name)))

    def _wrap(self, call):
        def stalling(*args, **kwargs):
            if threading.current_thread() is self.thread:
                self.calls += 1
                if self.calls == self.at:
                    self.stalled.set()
                    self.release.wait(60)
            return call(*args, **kwargs)

        return stalling


class LocalPlace:
    """Where the runs write: a local folder."""

    def __init__(self, base: pathlib.Path):
        self.base, self.made = base, 0

    def new_dest(self) -> str:
        self.made += 1
        (self.base / f"dest{self.made}").mkdir(parents=True)
        return str(self.base / f"dest{self.made}")

    def put(self, local: pathlib.Path, uri: str) -> None:
        shutil.copytree(local, uri, ignore=shutil.ignore_patterns(MANIFEST_NAME), dirs_exist_ok=True)

    def put_manifest(self, local: pathlib.Path, uri: str) -> None:
        shutil.copy(local / MANIFEST_NAME, uri)

    def local(self, uri: str) -> pathlib.Path:
        return pathlib.Path(uri)

    def names(self, uri: str) -> set[str]:
        return {p.name for p in pathlib.Path(uri).iterdir() if p.name != LEASE_NAME}


class GcsPlace(LocalPlace):
    """Where the runs write: a prefix of a bucket on the emulator, behind a proxy that enforces
    preconditions as GCS does (the emulator ignores them)."""

    def __init__(self, base: pathlib.Path, emulator, bucket: str):
        super().__init__(base)
        self.emulator, self.bucket = emulator, bucket

    def new_dest(self) -> str:
        self.made += 1
        return f"gs://{self.bucket}/dest{self.made}"

    def put(self, local: pathlib.Path, uri: str) -> None:
        for path in local.iterdir():
            if path.name != MANIFEST_NAME:
                self.emulator.upload_bytes(f"{uri}/{path.name}", path.read_bytes())

    def put_manifest(self, local: pathlib.Path, uri: str) -> None:
        self.emulator.upload_bytes(f"{uri}/{MANIFEST_NAME}", (local / MANIFEST_NAME).read_bytes())

    def local(self, uri: str) -> pathlib.Path:
        copy = self.base / f"copy{self.made}-{time.monotonic_ns()}"
        copy.mkdir()
        for found in self.emulator.list_uris(uri + "/"):
            name = found[len(uri) + 1 :]
            if "/" not in name:
                (copy / name).write_bytes(self.emulator.read_bytes(found))
        return copy

    def names(self, uri: str) -> set[str]:
        return {u[len(uri) + 1 :].split("/")[0] for u in self.emulator.list_uris(uri + "/")} - {LEASE_NAME}


@pytest.fixture(params=["local", "gcs"])
def place(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("place")
    if request.param == "local":
        yield LocalPlace(base)
        return
    emulator = request.getfixturevalue("gcs_emulator")
    bucket = f"fencing-{uuid.uuid4().hex[:10]}"
    emulator.create_bucket(bucket)
    with FaultProxy(emulator.url, kinds=(), preconditions=True) as proxy, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        yield GcsPlace(base, emulator, bucket)


def stage(place, dataset: pathlib.Path, publication: FolderPublication):
    """The run's folder holding `dataset`'s files, as its job leaves them; its manifest, renamed to it."""
    place.put(dataset, publication.folder)
    return dataclasses.replace(load_manifest(dataset), run=publication.run)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stall_at=st.integers(min_value=1, max_value=60), committed=st.booleans())
@example(
    stall_at=8, committed=True
)  # on gs://: stalled once it kept its manifest, which the run that took over removed
def test_a_stalled_run_never_touches_the_dataset_of_the_run_that_took_over(
    datasets, place, monkeypatch, stall_at, committed
):
    out = place.new_dest()
    if committed:
        place.put(datasets["old"], out)
        place.put_manifest(datasets["old"], out)
    run_a = FolderPublication(out, RUN_A)
    Lease(out, RUN_A, seconds=-1).acquire()  # expired at once: B may take it over
    run_a.prepare()
    manifest_a = stage(place, datasets["a"], run_a)

    stall = Stall(monkeypatch, stall_at)
    outcome = {}

    def publish_a():
        try:
            run_a.publish(manifest_a)
            outcome["a"] = "committed"
        except LeaseLost:
            outcome["a"] = "lost"
            # As a run that lost its lease ends: it removes its own staging folder, which it may have
            # written into after the run that took over removed it as a dead run's (on gs://, where a
            # write makes its folder again).
            run_a.clean_up_failed()

    stall.thread = threading.Thread(target=publish_a)
    stall.thread.start()
    while not stall.stalled.is_set() and stall.thread.is_alive():
        time.sleep(0.01)

    lease_b = Lease(out, RUN_B, seconds=1)  # waits 1 s for a commit in progress
    try:
        lease_b.acquire()
    except LeaseHeldError:
        outcome["b"] = "refused"
    else:
        run_b = FolderPublication(out, RUN_B)
        prepare_output(out, RUN_B, True, set(), False)
        run_b.prepare()
        run_b.publish(stage(place, datasets["b"], run_b))
        lease_b.release()
        outcome["b"] = "committed"
    stall.release.set()
    stall.thread.join(60)

    final = whole_dataset(place.local(out))
    if outcome["b"] == "committed":
        # A either lost its lease, or committed before it stalled (in its own clean-up) and B
        # then replaced its dataset.
        assert final.run == RUN_B and outcome["a"] in ("lost", "committed")
    else:  # locally: A stalled holding the folder's lock, so B could not take over
        assert outcome["a"] == "committed" and final.run == RUN_A and not storage.is_remote(out)
    assert place.names(out) == referenced(final), "nothing of the other run is left"


def test_a_run_stopped_past_its_lease_exits_3_and_the_new_holders_dataset_stays_whole(tmp_path):
    """The real thing: run A is stopped (SIGSTOP, as a suspended laptop) while it reads its
    shards back, its 2-second lease expires, run B takes over and commits, then A continues."""
    source, out, said = photos(tmp_path / "src", 2), tmp_path / "out", tmp_path / "a.log"
    with open(said, "w") as log:
        a = subprocess.Popen(
            [sys.executable, "-m", "tests.kill_at", "--stop", "pipeline.readback:CountShardRecords.process", "1"]
            + ["--", *convert_argv(source, out, "--lease_seconds", "2")],
            cwd=REPO,
            stderr=log,
        )
    try:
        try:
            wait_until_stopped(a)
            time.sleep(2.5)  # past A's lease
            assert main(convert_argv(photos(tmp_path / "src-b", 3), out)) == 0
            b = whole_dataset(out)
        finally:
            a.send_signal(signal.SIGCONT)
        assert a.wait(timeout=SUBPROCESS_TIMEOUT) == 3, said.read_text()
    finally:
        a.kill()  # never left behind, stopped or running, whatever failed
    assert "no longer holds" in said.read_text()
    after = whole_dataset(out)
    assert after.run == b.run and LocalPlace(tmp_path).names(str(out)) == referenced(after)


def wait_until_stopped(process: subprocess.Popen) -> None:
    """Until the process is stopped (state T in /proc), not just about to stop."""
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    stat = pathlib.Path(f"/proc/{process.pid}/stat")
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert process.poll() is None, f"exited {process.returncode} before it stopped"
        assert time.monotonic() < deadline, "not stopped in time"
        time.sleep(0.05)
