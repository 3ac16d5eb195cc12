"""What a reader of an output folder may rely on (issue 10): only a run whose shards were read back
whole is published; an untrusted run leaves manifest.rejected.json; a rerun never destroys the
good dataset, whatever instant it is killed at; one run at a time per output."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import apache_beam as beam
import numpy
import pytest
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.util import assert_that, equal_to
from PIL import Image

import pipeline.build
import pipeline.commands.convert
import pipeline.job
from core.contract.layout import SHARD_PARTS_FOLDER
from core.contract.versions import LATEST_NAME
from pipeline import shard_check
from pipeline.cli import main
from pipeline.folder_store import FolderPublication, referenced
from pipeline.lease import LEASE_NAME, Holder, Lease
from pipeline.planning import make_plan
from pipeline.publish import RunRejectedError
from pipeline.readback import CountShardRecords
from pipeline.shard_check import ShardCount
from tests.dataset_reader import load_manifest, load_rejected, read_split
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from transforms.shard_parts import SharedParts

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample" / "images"


def photos(root: pathlib.Path, per_class: int) -> pathlib.Path:
    for label_dir in sorted(SAMPLE.iterdir()):
        (root / label_dir.name).mkdir(parents=True)
        for path in sorted(label_dir.iterdir())[:per_class]:
            shutil.copy(path, root / label_dir.name / path.name)
    return root


def noise_photos(root: pathlib.Path, per_class: int) -> pathlib.Path:
    """JPEGs of noise in two class folders."""
    rng = numpy.random.default_rng(0)
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, (120, 160, 3), dtype=numpy.uint8)).save(root / label / f"{i}.jpg")
    return root


def whole_dataset(out: pathlib.Path):
    """The committed manifest, after checking every file it names is there and holds exactly the
    records it says (read by TensorFlow)."""
    manifest = load_manifest(out)
    for name, split in manifest.splits.items():
        assert len(read_split(out, name)) == split.records == sum(split.shard_lengths), name
    return manifest


def run_files(out: pathlib.Path) -> list[str]:
    """What runs leave in a folder besides the dataset, all hidden: staging folders, temporary
    files, a lease."""
    return sorted(p.name for p in out.iterdir() if p.name.startswith("."))


def convert_argv(source, out, *extra) -> list[str]:
    return ["--input", str(source), "--output", str(out), "--num_shards", "2", *map(str, extra)]


def killed_at(target: str, nth: int, argv: list[str]) -> subprocess.CompletedProcess:
    done = _run_kill_at([target, str(nth)], argv)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    return done


def _run_kill_at(targets: list[str], argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tests.kill_at", *targets, "--", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )


@pytest.fixture(scope="module")
def old_dataset(tmp_path_factory):
    """A committed dataset of 6 photos, and a source folder of 8 (so the rerun is told apart)."""
    base = tmp_path_factory.mktemp("publication")
    old_source = photos(base / "old", 2)
    out = base / "out"
    assert main(convert_argv(old_source, out)) == 0
    return out, photos(base / "new", 3)


@pytest.fixture
def dataset(old_dataset, tmp_path):
    out, source = old_dataset
    shutil.copytree(out, tmp_path / "out")
    return tmp_path / "out", source, load_manifest(out)


LOST = b"circle/0002.jpg"


def drop_one_record(monkeypatch, tmp_path) -> list[str]:
    """The runner loses one record between producing and writing it (as Beam 2.77's data plane
    can), on its way to WriteToTFRecord: the job's own counts still say it was written. Returns
    the flags of a run that writes through WriteToTFRecord (local runs append each record to its
    shard where it is made: test_a_record_missing_from_its_part_fails_the_run)."""
    original = pipeline.build.WriteSplits

    def lossy(records, output, shards, compression, file_format):
        kept = records | "LoseOne" >> beam.Filter(lambda r: LOST not in r.data)
        return kept | "Write" >> original(output, shards, compression, file_format)

    monkeypatch.setattr(pipeline.build, "WriteSplits", beam.ptransform_fn(lossy))
    config = tmp_path / "write_to_tfrecord.yaml"
    config.write_text("image: {local_write_while_reading: false}\n")
    return ["--config", config]


# --- verified before published


def test_records_lost_before_the_write_reject_the_run(tmp_path, monkeypatch):
    lossy_run = drop_one_record(monkeypatch, tmp_path)
    out = tmp_path / "out"
    assert main(convert_argv(photos(tmp_path / "src", 2), out, *lossy_run)) == 1
    assert not (out / "manifest.json").exists()
    rejected = load_rejected(out)
    [reason] = rejected.rejected
    split = next(s for s in rejected.splits.values() if s.name in reason)
    assert f"shards hold {split.records - 1} records but the job produced {split.records}" in reason
    assert sorted(p.name for p in out.iterdir()) == ["errors-00000-of-00001.jsonl", "manifest.rejected.json"]


@pytest.mark.parametrize("processes", [0, 2])
def test_a_record_missing_from_its_part_fails_the_run(dataset, monkeypatch, tmp_path, processes):
    """Where the thread or process that makes a record appends it to its shard part, the bundle's
    process accounts for every byte of every part: a record in a part that no report accounts for
    (its report lost, as when a process dies between appending and reporting) fails the run before
    any read-back, and the previous dataset stays. The new input is noise, which deflate would not
    shrink: its records are appended where they are made (records worth deflating are not)."""
    out, _, before = dataset
    source = noise_photos(tmp_path / "noise", 4)
    original = SharedParts.add

    def lose_the_first_report(self, written):  # of each attempt: the runner retries a failed bundle
        if getattr(self, "lost", False):
            original(self, written)
        else:
            self.lost = True

    monkeypatch.setattr(SharedParts, "add", lose_the_first_report)
    config = tmp_path / "config.yaml"
    config.write_text(f"image: {{local_processes: {processes}}}\n")
    assert main(convert_argv(source, out, "--overwrite", "--config", config)) == 3
    assert whole_dataset(out).run == before.run
    assert run_files(out) == []


def test_a_broken_or_missing_shard_is_a_verdict(old_dataset, tmp_path):
    out, _ = old_dataset
    shard = next(out.glob("train-*.tfrecord.gz"))
    cut = tmp_path / shard.name
    cut.write_bytes(shard.read_bytes()[:-20])
    [whole] = CountShardRecords("GZIP", index=False).process(str(shard))
    [broken] = CountShardRecords("GZIP", index=False).process(str(cut))
    [missing] = CountShardRecords("GZIP", index=False).process(str(tmp_path / "nothing.tfrecord.gz"))
    assert whole == ShardCount(shard.name, load_manifest(out).splits["train"].shard_lengths[0])
    assert broken.error and "truncated" in broken.error or "ends early" in broken.error
    assert missing.error == "missing"


def test_a_local_run_reads_its_shards_back_in_processes_with_the_same_verdicts(old_dataset, tmp_path, monkeypatch):
    monkeypatch.setattr(shard_check, "IN_PROCESSES_FROM_BYTES", 0)  # these shards are small
    out, _ = old_dataset
    shards = sorted(str(p) for p in out.glob("*.tfrecord.gz"))
    cut = tmp_path / pathlib.Path(shards[0]).name
    cut.write_bytes(pathlib.Path(shards[0]).read_bytes()[:-20])
    paths = [*shards[1:], str(cut), str(tmp_path / "nothing.tfrecord.gz")]
    expected = [next(iter(CountShardRecords("GZIP", index=False).process(path))) for path in paths]
    with beam.Pipeline(runner=BundleBasedDirectRunner()) as p:
        counted = p | beam.Create(paths, reshuffle=False) | beam.ParDo(CountShardRecords("GZIP", False, processes=2))
        assert_that(counted, equal_to(expected))


def _children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (the converting processes of a run)."""
    found = set()
    for entry in os.listdir("/proc"):
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(entry))
    return found


def _gone(pids: set[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(pathlib.Path(f"/proc/{pid}").exists() for pid in pids):
            return True
        time.sleep(0.05)
    return False


# Seconds after the first image is read: at once, while reading, while writing and reading back,
# about when the run commits (which it may finish first: then it exits 0 with a dataset).
INTERRUPT_DELAYS = (0, 0.1, 0.2, 0.3, 0.4)
# Each local runner's flags, and the line ReadImages logs as it starts reading on it.
LOCAL_RUNNERS = {
    "lean": ((), "reading images in 2 converting processes"),
    "parallel": (("--direct_num_workers", 2), "reading images on "),
}


@pytest.mark.parametrize("delay", INTERRUPT_DELAYS)
@pytest.mark.parametrize("runner", LOCAL_RUNNERS)
def test_an_interrupted_run_leaves_nothing_behind_and_says_so_in_one_line(tmp_path, runner, delay):
    """Ctrl-C reaches the whole process group, the converting processes included: whenever it
    comes, on either local runner, the run stops its threads, removes what it wrote (nothing writes
    after that), exits 130 with one line within seconds, and its converting processes end without
    a word."""
    flags, reading = LOCAL_RUNNERS[runner]
    source, out = photos(tmp_path / "src", 60), tmp_path / "out"
    config = tmp_path / "config.yaml"
    config.write_text("image: {local_processes: 2, read_batch: 1}\n")
    argv = [sys.executable, "-m", "pipeline", *convert_argv(source, out, "--config", config, *flags)]
    # Ctrl-C as in a terminal, also when the suite itself runs with SIGINT ignored (a shell's
    # background job), which the run would inherit: a caught signal is reset to its default in it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        run = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    log = []
    for line in run.stderr:  # interrupt once it reads images
        log.append(line)
        if reading in line:
            time.sleep(delay)
            converting = _children(run.pid)
            os.killpg(run.pid, signal.SIGINT)
            interrupted = time.monotonic()
            break
    log += run.stderr.readlines()
    code = run.wait(timeout=SUBPROCESS_TIMEOUT)
    assert time.monotonic() - interrupted < 10, "".join(log)
    time.sleep(0.5)  # anything a thread left running would write by now
    if code in (0, -signal.SIGINT):  # it finished first (or was interrupted on its way out)
        assert whole_dataset(out)
    else:
        assert code == 130, "".join(log)
        errors = [line for line in log if " ERROR " in line or "Traceback" in line or "KeyboardInterrupt" in line]
        assert len(errors) == 1 and "interrupted" in errors[0], "".join(log)
        left = sorted(p.name for p in out.iterdir()) if out.exists() else []
        if "manifest.json" in left:  # interrupted after its commit point: the dataset stays, whole, alone
            assert sorted(referenced(whole_dataset(out))) == left, "".join(log)
            assert "only after the run committed" in errors[0], "".join(log)
        else:
            assert left == [], "".join(log)
    assert _gone(converting, 5), "converting processes outlived the run"


def test_a_failed_run_leaves_nothing_behind(tmp_path, monkeypatch):
    def fail(self, path):
        raise OSError(f"disk gone while reading {path}")

    monkeypatch.setattr(CountShardRecords, "process", fail)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file")
    assert main(convert_argv(photos(tmp_path / "src", 2), out, "--allow_other_files")) == 3, "failed while running"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_a_run_that_fails_before_reading_ends_the_processes_started_for_it(tmp_path, monkeypatch):
    """The converting processes start before the input is planned (convert_pool.started_ahead): a
    job that fails before its pool takes them, or is refused by its plan, must not leave them
    running."""
    config = tmp_path / "config.yaml"
    config.write_text("image: {local_processes: 2}\n")
    before = _children(os.getpid())
    started_while_planning = []

    def plan(*args, **kwargs):
        started_while_planning.append(len(_children(os.getpid()) - before))
        return make_plan(*args, **kwargs)

    def fail(*args):
        raise RuntimeError("the graph could not be built")

    monkeypatch.setattr(pipeline.commands.convert, "make_plan", plan)
    monkeypatch.setattr(pipeline.job, "build_pipeline", fail)
    assert main(convert_argv(photos(tmp_path / "src", 2), tmp_path / "out", "--config", config)) == 3
    assert _children(os.getpid()) - before == set()
    (tmp_path / "empty").mkdir()
    assert main(convert_argv(tmp_path / "empty", tmp_path / "out2", "--config", config)) == 2  # no images
    assert _children(os.getpid()) - before == set()
    assert started_while_planning == [2, 2]


# --- a rerun never destroys the good dataset


def test_a_rejected_rerun_leaves_the_previous_dataset(dataset, monkeypatch, tmp_path):
    out, source, before = dataset
    lossy_run = drop_one_record(monkeypatch, tmp_path)
    assert main(convert_argv(source, out, "--overwrite", *lossy_run)) == 1
    assert whole_dataset(out).run == before.run
    [staging] = run_files(out)
    assert staging.startswith(".staging-") and load_rejected(out / staging).rejected


def test_an_overwrite_replaces_the_dataset_and_cleans_up(dataset):
    out, source, before = dataset
    assert main(convert_argv(source, out)) == 2, "a committed dataset needs --overwrite"
    assert main(convert_argv(source, out, "--overwrite")) == 0
    after = whole_dataset(out)
    assert after.run != before.run and after.counts.written > before.counts.written
    assert run_files(out) == []


@pytest.mark.parametrize(
    "target, nth, sees",
    [
        ("pipeline.readback:CountShardRecords.process", 1, "old"),  # while the job runs
        ("pipeline.lease:Fence.write", 1, "old"),  # verified, not committed
        ("pipeline.lease:Fence.copy", 2, "new"),  # committed in staging, halfway through moving in
        ("pipeline.lease:Fence.write", 2, "new"),  # moved in, manifest not yet switched
        ("pipeline.lease:Fence.delete", 2, "new"),  # switched, the replaced files not yet removed
        ("pipeline.lease:Fence.delete", 4, "new"),  # switched, staging not yet removed
    ],
)
def test_an_overwrite_killed_at_any_point_leaves_a_whole_dataset(dataset, target, nth, sees):
    out, source, before = dataset
    killed_at(target, nth, convert_argv(source, out, "--overwrite"))
    now = whole_dataset(out)
    assert (now.run == before.run) == (sees == "old")
    assert main(convert_argv(source, out, "--overwrite")) == 0, "the next run takes over the dead run's lease"
    assert whole_dataset(out).run not in (before.run, now.run)
    assert run_files(out) == [], "the next run removes what the dead one left"


@pytest.mark.parametrize(
    "target, parts_left",
    [
        ("pipeline.readback:CountShardRecords.process", False),  # shards written, reading them back
        ("transforms.shard_parts:finalize_shard", True),  # parts written, no shard yet
    ],
)
def test_a_killed_first_run_is_cleaned_up_by_the_next(tmp_path, target, parts_left):
    source, out = photos(tmp_path / "src", 2), tmp_path / "out"
    killed_at(target, 1, convert_argv(source, out))
    assert not (out / "manifest.json").exists() and (out / LEASE_NAME).exists()
    [staging] = [name for name in run_files(out) if name.startswith(".staging-")]
    assert (out / staging / SHARD_PARTS_FOLDER).exists() == parts_left
    assert main(convert_argv(source, out)) == 0, "no --overwrite needed: nothing committed was there"
    whole_dataset(out)
    assert run_files(out) == []


def test_a_second_ctrl_c_during_the_clean_up_leaves_the_lease_and_the_next_run_cleans_up(tmp_path):
    """Ctrl-C while reading, then again as the clean-up starts: what the run wrote stays, and so
    does its lease (pipeline.lease.Unfinished), which the next run takes over as a killed run's,
    removing what is left. The user is told so, not that the run cleaned up."""
    source, out = photos(tmp_path / "src", 2), tmp_path / "out"
    targets = [
        "transforms.images:ReadImages.process",
        "1",
        "pipeline.folder_store:FolderPublication.clean_up_failed",
        "1",
    ]
    done = _run_kill_at(["--interrupt", *targets], convert_argv(source, out))
    assert done.returncode == 130, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "interrupted while cleaning up" in errors[0], done.stderr[-3000:]
    assert (out / LEASE_NAME).exists()
    assert main(convert_argv(source, out)) == 0, "no --overwrite needed: nothing committed was there"
    whole_dataset(out)
    assert run_files(out) == []


@pytest.mark.parametrize("command", ["convert", "refresh"])
def test_a_ctrl_c_taken_only_after_the_commit_says_the_dataset_is_whole(tmp_path, command):
    """A Ctrl-C that reaches the run once it has committed (here: as it reads back what it
    committed) cleans up nothing the commit names, and the user is told the dataset is there,
    whole, not that the run cleaned up."""
    source, out = photos(tmp_path / "src", 2), tmp_path / "out"
    argv = ["refresh", *convert_argv(source, out)[:4]] if command == "refresh" else convert_argv(source, out)
    done = _run_kill_at(["--interrupt", "pipeline.job:_committed", "1"], argv)
    assert done.returncode == 130, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "only after the run committed" in errors[0], done.stderr[-3000:]
    dataset = out / (out / LATEST_NAME).read_text().strip() if command == "refresh" else out
    manifest = whole_dataset(dataset)
    assert f"{sum(split.records for split in manifest.splits.values())} records, run {manifest.run}" in errors[0]
    assert sorted(p.name for p in dataset.iterdir()) == sorted(referenced(manifest))
    assert not (out / LEASE_NAME).exists(), "the lease is released"


# --- one run at a time


def write_lease(out: pathlib.Path, host: str, pid: int, expires_in_s: float) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    holder = Holder("20260101T000000000000Z", host, pid, now.isoformat(), "")
    expires = (now + datetime.timedelta(seconds=expires_in_s)).isoformat()
    out.mkdir(parents=True, exist_ok=True)
    (out / LEASE_NAME).write_bytes(Holder(**{**holder.__dict__, "expires": expires}).to_bytes())


def test_a_second_run_refuses_while_the_first_holds_the_output(tmp_path, caplog):
    source, out = photos(tmp_path / "src", 2), tmp_path / "out"
    first = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *convert_argv(source, out)], cwd=REPO, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while not (out / LEASE_NAME).exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert main(convert_argv(source, out)) == 2
    assert f"pid {first.pid}" in caplog.text and "another run is writing this output" in caplog.text
    assert first.wait(timeout=SUBPROCESS_TIMEOUT) == 0, first.stderr.read()[-3000:]
    whole_dataset(out)


@pytest.mark.parametrize(
    "host, pid, expires_in_s, code",
    [
        ("elsewhere", 1, 600, 2),  # another machine's live run
        ("elsewhere", 1, -1, 0),  # another machine's run, lease expired
        (socket.gethostname(), os.getpid(), 600, 2),  # a live process here
        (socket.gethostname(), 2**22 + 7, 600, 0),  # a process here that is gone
    ],
    ids=["live-elsewhere", "expired-elsewhere", "live-here", "gone-here"],  # the same in every pytest process
)
def test_a_lease_is_taken_over_only_when_stale(tmp_path, caplog, host, pid, expires_in_s, code):
    source, out = photos(tmp_path / "src", 1), tmp_path / "out"
    write_lease(out, host, pid, expires_in_s)
    assert main(convert_argv(source, out)) == code
    if code == 0:
        assert "took over the stale lease" in caplog.text and not (out / LEASE_NAME).exists()
    else:
        assert json.loads((out / LEASE_NAME).read_bytes())["host"] == host, "a live holder's lease is untouched"


# --- the same on GCS (the emulator over HTTP), where a folder cannot be renamed


def download_tree(emulator, prefix: str, local: pathlib.Path) -> list[str]:
    """Every object below `prefix` into `local`, keeping relative paths; returns those paths."""
    relative = []
    for uri in emulator.list_uris(prefix + "/"):
        name = uri[len(prefix) + 1 :]
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(emulator.read_bytes(uri))
        relative.append(name)
    return relative


@pytest.mark.parametrize(
    "target, nth, sees",
    [
        ("pipeline.readback:CountShardRecords.process", 1, "old"),
        ("pipeline.lease:Fence.copy", 2, "new"),
        ("pipeline.lease:Fence.delete", 4, "new"),
    ],
)
def test_on_gcs_an_overwrite_killed_at_any_point_leaves_a_whole_dataset(
    gcs_emulator, gcs_bucket, tmp_path, target, nth, sees
):
    old, new = photos(tmp_path / "old", 2), photos(tmp_path / "new", 3)
    gcs_emulator.upload_dir(new, f"gs://{gcs_bucket}/new")
    out = f"gs://{gcs_bucket}/out"
    assert main(convert_argv(old, out)) == 0
    download_tree(gcs_emulator, out, tmp_path / "before")
    before = whole_dataset(tmp_path / "before")

    killed_at(target, nth, convert_argv(f"gs://{gcs_bucket}/new", out, "--overwrite"))
    download_tree(gcs_emulator, out, tmp_path / "killed")
    assert (whole_dataset(tmp_path / "killed").run == before.run) == (sees == "old")

    assert main(convert_argv(f"gs://{gcs_bucket}/new", out, "--overwrite")) == 0
    names = download_tree(gcs_emulator, out, tmp_path / "after")
    assert whole_dataset(tmp_path / "after").counts.written > before.counts.written
    assert not [n for n in names if n.startswith((".staging-", "beam-temp-", LEASE_NAME))], names


def test_on_gcs_a_failed_run_leaves_nothing_behind(gcs_emulator, gcs_bucket, tmp_path, monkeypatch):
    def fail(self, path):
        raise OSError(f"connection lost while reading {path}")

    monkeypatch.setattr(CountShardRecords, "process", fail)
    out = f"gs://{gcs_bucket}/out"
    gcs_emulator.upload_bytes(f"{out}/notes.txt", b"the user's own file")
    source = photos(tmp_path / "src", 2)
    assert main(convert_argv(source, out)) == 2, "refused: the user's file is there"
    assert main(convert_argv(source, out, "--allow_other_files")) == 3
    assert gcs_emulator.list_uris(out + "/") == [f"{out}/notes.txt"]


def test_a_run_that_lost_its_lease_touches_nothing(tmp_path, monkeypatch):
    """A run stalled past its lease's expiry, taken over by another: it stops (exit 3) without
    committing, rejecting or removing anything but its own folder."""
    out = tmp_path / "out"
    count = CountShardRecords.process

    def taken_over_meanwhile(self, path):
        write_lease(out, "elsewhere", 1, 600)
        yield from count(self, path)

    monkeypatch.setattr(CountShardRecords, "process", taken_over_meanwhile)
    assert main(convert_argv(photos(tmp_path / "src", 1), out)) == 3
    assert sorted(p.name for p in out.iterdir()) == [LEASE_NAME], "the new holder's lease stays, and nothing else"
    assert json.loads((out / LEASE_NAME).read_bytes())["host"] == "elsewhere"


@pytest.mark.parametrize("command", [[], ["refresh"]])
def test_an_option_that_loses_records_is_refused_before_any_work(tmp_path, caplog, command):
    out = tmp_path / "out"
    argv = [*command, *convert_argv(photos(tmp_path / "src", 1), out), "--experiments=data_buffer_time_limit_ms=1000"]
    assert main(argv) == 2
    assert "data_buffer_time_limit_ms=1000" in caplog.text and not out.exists()


def test_an_unattended_job_fails_when_its_run_is_rejected(old_dataset, tmp_path):
    """A template's job has no launcher to report a rejection: it fails, so alerting sees it."""
    out, _ = old_dataset
    rejected = dataclasses.replace(load_manifest(out), rejected=("the shards hold 1 record too few",), run="r2")
    for unattended in (False, True):
        folder = tmp_path / str(unattended)
        publication = FolderPublication(str(folder), "r2", unattended=unattended)
        shutil.copytree(out, publication.folder)
        (pathlib.Path(publication.folder) / "manifest.json").unlink()
        Lease(str(folder), "r2").acquire()
        if unattended:
            with pytest.raises(RunRejectedError, match="1 record too few"):
                publication.publish(rejected)
        else:
            publication.publish(rejected)
        assert load_rejected(folder).rejected == rejected.rejected and not list(folder.glob("*.tfrecord.gz"))


def test_on_gcs_a_killed_first_run_is_cleaned_up_by_the_next(gcs_emulator, gcs_bucket, tmp_path):
    """--overwrite here: this emulator ignores ifGenerationMatch, so the next run's lease silently
    replaces the dead one instead of taking it over (test_lease.py checks that part against a
    server that enforces it) and the run cannot tell the dead run's shards are its kind's."""
    source, out = photos(tmp_path / "src", 2), f"gs://{gcs_bucket}/out"
    killed_at("pipeline.readback:CountShardRecords.process", 1, convert_argv(source, out))
    assert f"{out}/{LEASE_NAME}" in gcs_emulator.list_uris(out + "/")
    assert main(convert_argv(source, out, "--overwrite")) == 0
    names = download_tree(gcs_emulator, out, tmp_path / "after")
    whole_dataset(tmp_path / "after")
    assert not [n for n in names if n.startswith((".staging-", "beam-temp-", LEASE_NAME))], names


@pytest.mark.parametrize(
    "target",
    [
        "pipeline.readback:CountShardRecords.process",  # while the job runs
        "pipeline.version_store:VersionPublication.advance",  # committed, LATEST not yet moved
    ],
)
def test_on_gcs_a_killed_refresh_leaves_latest_and_the_next_one_publishes(gcs_emulator, gcs_bucket, tmp_path, target):
    source, root = photos(tmp_path / "src", 2), f"gs://{gcs_bucket}/root"
    refresh = ["refresh", "--input", str(source), "--output", root]
    assert main(refresh) == 0
    first = gcs_emulator.read_bytes(f"{root}/LATEST").decode().strip()
    shutil.copy(SAMPLE / "circle" / "0003.jpg", source / "circle" / "new.jpg")
    killed_at(target, 1, refresh)
    assert gcs_emulator.read_bytes(f"{root}/LATEST").decode().strip() == first
    assert main(refresh) == 0
    latest = gcs_emulator.read_bytes(f"{root}/LATEST").decode().strip()
    download_tree(gcs_emulator, f"{root}/{latest}", tmp_path / "latest")
    assert latest > first and whole_dataset(tmp_path / "latest").counts.written == 7
    versions = {uri[len(root) + 1 :].split("/")[0] for uri in gcs_emulator.list_uris(root + "/")}
    assert not any(v.startswith(".lease") for v in versions)
    if target.endswith("CountShardRecords.process"):
        assert versions == {first, latest, "LATEST"}, "the dead run's unfinished version is removed"
