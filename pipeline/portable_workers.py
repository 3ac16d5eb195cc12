"""A PortableRunner job's SDK worker on this machine, watched for its end.

Beam 2.77's local job service (`python -m apache_beam.runners.portability.local_job_service_main`)
never notices that a job's SDK worker died: the thread reading the worker's control stream ends
with the broken stream (ControlConnection._read, fn_api_runner/worker_handlers.py) and leaves the
running bundle's future unset, and the runner waits for it, and its launcher for the job, forever
(measured: a worker SIGKILLed mid-run). Where the job's workers run on this machine, started by a
worker pool (--environment_type EXTERNAL: runners.portable_workers_here), the launcher watches the
job's worker process; when it has ended and the job has not finished WORKER_LOST_GRACE_SECONDS
later, the launcher cancels the job and the run fails (exit 3, what it wrote removed).

It relies on two Beam internals (tests/test_portable_runner.py fails if either changes): the job
service logs `self.control_address: ADDRESS` as it asks the pool for the job's worker, and the pool
starts that worker as `python -c '... SdkHarness("ADDRESS", ...)'`, ADDRESS being the job's own
control server (the message reaches the launcher in the job's message stream, which Beam's wait
reads). A worker it cannot see in /proc (another user's, in a container; no /proc: not Linux) is
not watched.

Beam 2.77 also gives the launcher's wait for the job (its state and message streams) the deadline
of `--job_server_timeout` (300 s by default), meant for the calls that set the job up, so a longer
job lost its launcher while it ran on: UnboundedWait keeps the deadline for those calls only.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time

from apache_beam.runners import runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle, PortableRunner

_LOG = logging.getLogger(__name__)

POLL_SECONDS = 0.2
# How long a job whose worker has ended gets to finish on its own: a worker also ends when its job
# is done, a moment before the job service reports the job done.
WORKER_LOST_GRACE_SECONDS = 10.0
_CONTROL_ADDRESS = re.compile(r"self\.control_address: (\S+)")


class WorkerLostError(RuntimeError):
    """The job's SDK worker ended while the job ran, and the job was cancelled."""


class WatchedPortableRunner(PortableRunner):
    """The PortableRunner, with each job's SDK worker watched while the launcher waits for it, and
    a wait for the job as long as the job takes."""

    def create_job_service_handle(self, job_service, options) -> JobServiceHandle:
        return UnboundedWait(job_service, options)

    def run_portable_pipeline(self, pipeline, options) -> runner.PipelineResult:
        return WatchedResult(super().run_portable_pipeline(pipeline, options))


class UnboundedWait(JobServiceHandle):
    """A job service handle whose `--job_server_timeout` bounds preparing and staging the job, not
    the streams that follow the job until it ends (module docstring)."""

    def run(self, preparation_id):
        self.timeout = None  # prepare and stage, which submit calls first, are done
        return super().run(preparation_id)


class WatchedResult(runner.PipelineResult):
    """A portable job's result whose wait ends, with WorkerLostError, when the job's worker ended
    while the job went on (WorkerWatch)."""

    def __init__(self, result):
        super().__init__(result._state)
        self._result = result

    @property
    def state(self):
        return self._result.state

    def cancel(self):
        return self._result.cancel()

    def metrics(self):
        return self._result.metrics()

    def wait_until_finish(self, duration=None):
        """Beam's wait, which ends in an error of its own ("failed in state CANCELLED") when the watch
        cancelled the job: WorkerLostError says why instead."""
        watch = WorkerWatch(self._result)
        watch.start()
        error = None
        try:
            state = self._result.wait_until_finish(duration)
        except Exception as e:
            error = e
        finally:
            watch.stop()
        if watch.lost is not None:
            raise _lost(watch.lost) from error
        if error is not None:
            raise error
        return state


def _lost(worker: int) -> WorkerLostError:
    return WorkerLostError(
        f"the job's SDK worker (process {worker}) ended while the job ran, and Beam's local job service waits "
        "for a lost worker forever: the job was cancelled"
    )


class WorkerWatch(threading.Thread):
    """Finds the job's worker process from the job's messages, then watches it (module docstring).
    `lost`: the worker's process id once the job was cancelled for its loss, else None."""

    def __init__(self, result):
        super().__init__(name="portable-worker-watch", daemon=True)
        self._result = result
        self._finished = threading.Event()
        self.lost: int | None = None

    def stop(self) -> None:
        """The launcher's wait is over: the watch ends."""
        self._finished.set()
        self.join()

    def run(self) -> None:
        try:
            address = self._control_address()
            worker = address and self._worker(address)
            if worker:
                _LOG.info("watching the job's SDK worker (process %d)", worker[0])
            if worker and self._ended(worker) and not self._finishes_within(WORKER_LOST_GRACE_SECONDS):
                _LOG.info("cancelling the job: its SDK worker (process %d) has ended", worker[0])
                self.lost = worker[0]
                self._result.cancel()
        except Exception:  # the watch must never fail the job it watches
            _LOG.debug("watching the portable job's SDK worker stopped", exc_info=True)

    def _control_address(self) -> str | None:
        """The job's control server's address, from the job's messages as Beam's wait collects them
        (PipelineResult._messages)."""
        seen = 0
        while not self._finished.wait(POLL_SECONDS):
            new = self._result._messages[seen:]
            seen += len(new)
            for message in new:
                found = _CONTROL_ADDRESS.search(message.message_response.message_text)
                if found:
                    return found.group(1)
        return None

    def _worker(self, address: str) -> tuple[int, str] | None:
        """The worker's process (id, start time), once the pool has started it."""
        while not self._finished.wait(POLL_SECONDS):
            found = find_sdk_worker(address)
            if found:
                return found
        return None

    def _ended(self, worker: tuple[int, str]) -> bool:
        """Waits until the worker ends (True) or the launcher's wait does (False)."""
        while not self._finished.wait(POLL_SECONDS):
            if not alive(*worker):
                return True
        return False

    def _finishes_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._finished.wait(POLL_SECONDS) or runner.PipelineState.is_terminal(self._result.state):
                return True
        return False


def find_sdk_worker(address: str) -> tuple[int, str] | None:
    """The running process, if any, of the SDK worker a pool started for the control server at
    `address`: (process id, start time, which tells a reused id apart)."""
    wanted = f'SdkHarness("{address}"'.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if wanted not in f.read():
                    continue
        except OSError:
            continue
        started = _start_time(int(entry))
        if started is not None:
            return int(entry), started
    return None


def alive(pid: int, started: str) -> bool:
    """Whether process `pid` that started at `started` still runs (not a zombie, not gone)."""
    return _start_time(pid) == started


def _start_time(pid: int) -> str | None:
    """A running process's start time (/proc/PID/stat, field 22); None once it is a zombie or gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]
