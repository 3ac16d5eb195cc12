"""The job on a real distributed engine: Beam's portable stack (tests/portable_stack.py), where the
launcher submits the job to a job service and its DoFns run in an SDK worker process started by a
worker pool, the harness Dataflow's Runner v2 uses. Each kind of the bundled sample, and a gs://
conversion on the GCS emulator, commits there what the default runner commits, and `inspect
--verify` passes; a local path in an image CSV is the user's file there (the workers run on this
machine); and a worker killed mid-run fails the run (exit 3) with nothing published, and a rerun
commits. What only Dataflow shows (retried bundles on other workers, autoscaling, its own I/O
quotas) is not here: README, Running on Google Cloud."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.cli import main
from pipeline.runners import portable_workers_here, reads_local_files
from tests.dataset_reader import load_manifest
from tests.portable_stack import KINDS, REPO, SAMPLE, PortableStack, contents
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from tests.test_end_to_end_gcs import download_dataset


@pytest.fixture(scope="module")
def stack(gcs_emulator):
    """One job service and one worker pool for the module; the pool's workers get the emulator's
    variables (gcs_emulator sets them in this process's environment)."""
    with PortableStack() as running:
        yield running


def portable(job_endpoint: str, environment: str, *more: str) -> list[str]:
    return ["--runner", "PortableRunner", "--job_endpoint", job_endpoint, "--environment_type", environment, *more]


def external(job_endpoint: str, pool: str) -> list[str]:
    return portable(job_endpoint, "EXTERNAL", "--environment_config", pool)


@pytest.mark.parametrize(
    "flags",
    [
        external("localhost:8099", "localhost:50000"),
        external("127.0.0.1:8099", "[::1]:50000"),
        external("embed", "127.0.0.2:50000"),  # the job service in the launcher's process
        external("localhost:8099", '{"url": "localhost:50000"}'),
        portable("localhost:8099", "external", "--environment_options", "external_service_address=localhost:50000"),
        portable("localhost:8099", "LOOPBACK"),  # the workers run in the launcher's process
    ],
)
def test_a_portable_runners_workers_started_on_this_machine_read_the_users_files(flags):
    options = PipelineOptions(flags)
    assert portable_workers_here(options) and reads_local_files(options)


@pytest.mark.parametrize(
    "flags",
    [
        # The job service asks for workers at the pool's address from its own machine: a remote
        # job service's localhost is another machine.
        external("jobs.example.com:8099", "localhost:50000"),
        external("localhost:8099", "10.1.2.3:50000"),
        external("localhost:8099", "localhostile:50000"),
        portable("localhost:8099", "DOCKER"),  # a container, with a disk of its own
        ["--runner", "PortableRunner", "--job_endpoint", "localhost:8099"],  # DOCKER, Beam's default
        portable("localhost:8099", "PROCESS"),
        ["--runner", "DataflowRunner"],
    ],
)
def test_other_workers_read_their_own_disks(flags):
    options = PipelineOptions(flags)
    assert not portable_workers_here(options) and not reads_local_files(options)


@pytest.mark.parametrize("flags", [[], ["--direct_num_workers", "2"], ["--runner", "DirectRunner"]])
def test_the_local_runners_read_the_users_files(flags):
    assert reads_local_files(PipelineOptions(flags))


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_commits_on_the_portable_stack_what_the_default_runner_does(stack, kind, tmp_path):
    args, key = KINDS[kind]
    portable, default = tmp_path / "portable", tmp_path / "default"
    assert main([*args, "--output", str(portable), *stack.beam_args]) == 0, stack.logs()
    assert main([*args, "--output", str(default)]) == 0

    assert contents(portable, key) == contents(default, key)
    assert sorted(p.name for p in portable.iterdir()) == sorted(p.name for p in default.iterdir())
    assert main(["inspect", str(portable), "--verify"]) == 0


def test_gcs_to_gcs_on_the_portable_stack(stack, gcs_emulator, gcs_bucket, tmp_path):
    """The workers read the sources from and write the shards to the emulator themselves."""
    for label in ("circle", "square", "triangle"):
        (tmp_path / "photos" / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:20]:
            shutil.copy(path, tmp_path / "photos" / label / path.name)
    gcs_emulator.upload_dir(tmp_path / "photos", f"gs://{gcs_bucket}/raw")
    args = ["--input", f"gs://{gcs_bucket}/raw"]
    portable, default = f"gs://{gcs_bucket}/portable", f"gs://{gcs_bucket}/default"
    assert main([*args, "--output", portable, *stack.beam_args]) == 0, stack.logs()
    assert main([*args, "--output", default]) == 0

    assert main(["inspect", portable, "--verify"]) == 0
    ours = contents(download_dataset(gcs_emulator, portable, tmp_path / "portable"), "image/filename")
    theirs = contents(download_dataset(gcs_emulator, default, tmp_path / "default"), "image/filename")
    assert ours == theirs
    assert sum(len(records) for records in ours[0].values()) == 60


class Launch:
    """`python -m pipeline ARGS` in a process of its own, its output collected as it comes; a
    context manager that kills it on the way out if it still runs (a failed test)."""

    def __init__(self, args: list[str]):
        command = [sys.executable, "-m", "pipeline", *args]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def running(self) -> bool:
        return self.process.poll() is None

    def wait_for(self, text: str) -> None:
        """Until a line of its output holds `text`."""
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT
        while not any(text in line for line in list(self.lines)):
            assert self.running() and time.monotonic() < deadline, f"no {text!r} in:\n{self.log()}"
            time.sleep(0.05)

    def finish(self) -> int:
        self.process.wait(timeout=SUBPROCESS_TIMEOUT)
        self._reader.join(timeout=SUBPROCESS_TIMEOUT)
        return self.process.returncode

    def log(self) -> str:
        return "".join(self.lines)

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, *exc) -> None:
        if self.running():
            self.process.kill()
        self.finish()


def new_worker(stack: PortableStack, before: set[int], run: Launch) -> int:
    """The SDK worker the pool starts for `run`'s job, frozen (SIGSTOP) the moment it is seen."""
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while time.monotonic() < deadline and run.running():
        started = set(stack.sdk_workers()) - before
        if started:
            [worker] = started
            os.kill(worker, signal.SIGSTOP)
            return worker
        time.sleep(0.005)
    raise AssertionError(f"no SDK worker started:\n{run.log()}\n{stack.logs()}")


def freeze_once_it_writes(worker: int, out, run: Launch) -> None:
    """Lets the frozen `worker` run in steps of 20 ms until the job has written a file into its run
    folder, then leaves it frozen there: mid-run, whatever the machine's speed."""
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while not any(p.is_file() for p in out.glob(".staging-*/**/*")):
        assert run.running() and time.monotonic() < deadline, f"the job ended before it wrote:\n{run.log()}"
        os.kill(worker, signal.SIGCONT)
        time.sleep(0.02)
        os.kill(worker, signal.SIGSTOP)


def test_a_worker_killed_while_it_writes_fails_the_run_and_a_rerun_commits(stack, tmp_path):
    args, _ = KINDS["images"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file")
    argv = [*args, "--output", str(out), "--allow_other_files", *stack.beam_args]
    before = set(stack.sdk_workers())
    with Launch(argv) as run:
        worker = new_worker(stack, before, run)
        freeze_once_it_writes(worker, out, run)
        os.kill(worker, signal.SIGKILL)
        assert run.finish() == 3, run.log()

    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"], run.log()
    assert main(argv) == 0, "the rerun commits: nothing was published, so it needs no --overwrite"
    assert load_manifest(out).counts.written == 360


def test_a_worker_lost_before_it_connects_fails_the_run_instead_of_hanging_it(stack, tmp_path):
    """Beam's local job service would wait for that worker forever (pipeline.portable_workers): the
    launcher sees the worker's process end, cancels the job and fails the run."""
    args, _ = KINDS["csv"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file")
    before = set(stack.sdk_workers())
    with Launch([*args, "--output", str(out), "--allow_other_files", *stack.beam_args]) as run:
        worker = new_worker(stack, before, run)
        run.wait_for(f"watching the job's SDK worker (process {worker})")
        os.kill(worker, signal.SIGKILL)
        assert run.finish() == 3, run.log()

    assert f"the job's SDK worker (process {worker}) ended while the job ran" in run.log()
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"], run.log()


def test_a_job_longer_than_the_job_server_timeout_is_waited_for(stack, tmp_path):
    """`--job_server_timeout` bounds the calls that reach the job service (prepare, stage), not
    the wait for the job: Beam 2.77 gives its state stream the same deadline, so the launcher of a
    job that outlived it stopped waiting with DEADLINE_EXCEEDED while the job ran on."""
    args, _ = KINDS["images"]
    out = tmp_path / "out"
    started = time.monotonic()
    assert main([*args, "--output", str(out), *stack.beam_args, "--job_server_timeout", "1"]) == 0, stack.logs()
    assert time.monotonic() - started > 1, "the job ended within the timeout: the test shows nothing"
    assert load_manifest(out).counts.written == 360
