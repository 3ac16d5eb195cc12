"""Beam's portable stack on loopback, for tests: the local job service and an SDK worker pool, each
a process of its own, as FACTS.md measured them (the harness Dataflow's Runner v2 uses, without
Dataflow); and what tests that run the same conversion on two runners compare (`contents`)::

    with PortableStack(env) as stack:
        main([..., *stack.beam_args])      # the job runs in the job service, its DoFns in a worker
        stack.sdk_workers()                # the worker processes the pool has started, still running

Each runs `python -m MODULE ARGS` as Beam documents it (through runpy, behind a watchdog thread
that ends the process's session once the process that started it is gone, so a killed test run
leaves no servers behind), in a session of its own: `stop` ends each session, the pool's workers
with it. The pool starts each job's worker as a plain `python`, so the venv's bin comes first on its
PATH; both run from the repository root (on their PYTHONPATH too), so a worker imports this
checkout's `pipeline` and `transforms`.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tests.dataset_reader import load_manifest, read_split
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample"
# Each kind's conversion of the bundled sample (scripts/make_sample.py), and the feature that names
# a record's source.
KINDS = {
    "images": (["--input", str(SAMPLE / "images")], "image/filename"),
    "image_csv": (["--kind", "image_csv", "--input", str(SAMPLE / "images.csv")], "image/filename"),
    "csv": (["--kind", "csv", "--input", str(SAMPLE / "tabular" / "*.csv*")], "id"),
}
JOB_SERVICE = "apache_beam.runners.portability.local_job_service_main"
WORKER_POOL = "apache_beam.runners.worker.worker_pool_main"
# `python -c _LAUNCHER PARENT MODULE ARGS...` = `python -m MODULE ARGS...`, ended with its session
# when PARENT is gone.
_LAUNCHER = """
import os, runpy, signal, sys, threading, time
parent = int(sys.argv.pop(1))
def _watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    os.killpg(0, signal.SIGKILL)
threading.Thread(target=_watch, daemon=True).start()
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (/proc/PID/task/*/children)."""
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def state(pid: int) -> str | None:
    """A process's state letter (R, S, Z, ...); None once it is gone."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _is_sdk_worker(pid: int) -> bool:
    try:
        return b"SdkHarness(" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class PortableStack:
    """The job service and the worker pool on free loopback ports; a context manager.

    env: the environment both get (the pool passes it on to its workers: a GCS emulator's
    variables, for one); the venv's bin and the repository are put first on PATH and PYTHONPATH.
    """

    def __init__(self, env: dict[str, str] | None = None, start_timeout: float = SUBPROCESS_TIMEOUT):
        self.env = dict(os.environ if env is None else env)
        self.start_timeout = start_timeout
        self.job_port = self.pool_port = 0
        self._procs: list[subprocess.Popen] = []
        self._logs = tempfile.TemporaryDirectory(prefix="portable-stack-")

    @property
    def beam_args(self) -> list[str]:
        return [
            "--runner",
            "PortableRunner",
            "--job_endpoint",
            f"localhost:{self.job_port}",
            "--environment_type",
            "EXTERNAL",
            "--environment_config",
            f"localhost:{self.pool_port}",
        ]

    @property
    def pool_pid(self) -> int:
        return self._procs[1].pid

    def sdk_workers(self) -> list[int]:
        """The SDK workers the pool has started that still run (the pool never reaps the others):
        its children running SdkHarness (not one between fork and exec, still the pool's copy)."""
        return [pid for pid in children(self.pool_pid) if state(pid) not in (None, "Z", "X") and _is_sdk_worker(pid)]

    def start(self) -> PortableStack:
        env = {**self.env, "PATH": os.pathsep.join([os.path.dirname(sys.executable), self.env.get("PATH", "")])}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), self.env.get("PYTHONPATH", "")) if p)
        try:
            self.job_port, self.pool_port = _free_port(), _free_port()
            self._launch(env, JOB_SERVICE, "--port", str(self.job_port))
            self._launch(env, WORKER_POOL, "--service_port", str(self.pool_port))
            self._wait_until_both_accept()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, env: dict[str, str], module: str, *args: str) -> None:
        log = open(os.path.join(self._logs.name, module.rsplit(".", 1)[-1] + ".log"), "wb")
        with log:
            self._procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _LAUNCHER, str(os.getpid()), module, *args],
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def _wait_until_both_accept(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        waiting = {self.job_port, self.pool_port}
        while waiting:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[4]} exited with {proc.returncode}:\n{self.logs()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"ports {sorted(waiting)} did not accept in {self.start_timeout:.0f} s:\n{self.logs()}"
                )
            waiting = {port for port in waiting if not _accepts(port)}
            time.sleep(0.1)

    def logs(self) -> str:
        """Both processes' output so far (for failure messages)."""
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
            for path in sorted(pathlib.Path(self._logs.name).glob("*.log"))
        )

    def stop(self) -> None:
        """Ends both processes' sessions (the pool's workers with them) and waits for them."""
        for proc in self._procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=SUBPROCESS_TIMEOUT)
        self._procs.clear()
        self._logs.cleanup()

    def __enter__(self) -> PortableStack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# What two runs of the same conversion may differ in: when, by which run and into which folder they
# were written, and how records spread over a split's shards (each bundle starts its round robin at
# a random shard).
_RUN_FIELDS = ("created", "run")


def contents(folder, key: str) -> tuple[dict, dict]:
    """A dataset as two runs of one conversion must agree on it: every record, by split and by its
    `key` feature (each key once), and the manifest less _RUN_FIELDS, the output and shard_lengths."""
    manifest = load_manifest(folder)
    records = {}
    for split in manifest.splits:
        listed = read_split(folder, split)
        records[split] = {record[key]: record for record in listed}
        assert len(records[split]) == len(listed), f"a {key} twice in {folder}'s {split}"
    summary = dataclasses.asdict(manifest)
    for field in _RUN_FIELDS:
        del summary[field]
    del summary["options"]["output"]
    for split in summary["splits"].values():
        del split["shard_lengths"]
    return records, summary
