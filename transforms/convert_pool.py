"""Image conversion in worker processes, for local runs.

On a local runner all of ReadImages runs in one Python process: its threads share one GIL, which
Pillow's decoding, the Example's encoding and the bundle thread's own work all need, so a
many-core machine got a few cores' worth of work. Here each converting process does a source's
whole conversion (transforms.image_convert: read, check, Example and, when the bundle's parts are
local, appending the record to the part it was given), and the bundle thread only hands out
sources and collects small outcomes.

A process that dies while converting (a decoder crash on hostile input takes the whole process
with it) costs the source it was converting, which becomes a dead letter; the sources queued
behind it go to a fresh process. Nothing it appended before is lost: every record it reported
was whole in its part (transforms.part_appender).

A local run starts its processes (`started_ahead`) while it plans and Beam sets the job up, so
that each has its interpreter and imports ready when the first sources come; the pool takes them
over and sends each one its settings.

On Dataflow each core already runs its own SDK process, so the conversion stays in-process there.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import subprocess
import sys
from collections.abc import Iterator
from multiprocessing.connection import Connection

import transforms
from transforms.image_convert import ImageConverter, ImageSettings
from transforms.outcomes import DeadLetter, Source

# Where `transforms` is imported from, for the converting processes (a checkout or site-packages).
_IMPORT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(transforms.__file__)))

CRASHED = "the image decoder crashed on it (its converting process died)"
_READY, _RELEASE = "ready", "release"

Item = tuple[Source, str | None]  # a source, and the shard part its record goes to (None: return it)


def usable_cores() -> int:
    """The cores this process may run on (taskset, cgroup cpusets), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class ProcessFailed(RuntimeError):
    """A converting process died before it could take any work: nothing to blame on a source."""


def _serve(requests: Connection, results: Connection) -> None:
    """A converting process: its ImageSettings first, then lists of items, each answered with its
    (outcome, bytes read), in order, or with the exception conversion raised (a configuration
    error, a full disk: raised again by the caller); _RELEASE closes its parts. It ends when
    either pipe closes (the runner is done, or gone)."""
    try:
        converter = ImageConverter(requests.recv())
        results.send(_READY)
        while True:
            message = requests.recv()
            if message == _RELEASE:
                converter.release()
                continue
            for source, part in message:
                try:
                    result = converter.convert(source, part)
                except Exception as e:
                    result = e
                results.send(result)
    except (EOFError, BrokenPipeError):
        return


class _Worker:
    """One converting process and the items sent to it, answered in the order they were sent.
    Its first message is to be its ImageSettings."""

    def __init__(self):
        # A fresh interpreter (`python -m transforms.convert_pool`), talking over its stdin and
        # stdout: it inherits none of the runner's threads, locks or clients, as a fork would,
        # and imports none of the job's modules, as multiprocessing's spawn would (__main__). In
        # a process group of its own, so that Ctrl-C reaches only the runner, which decides what
        # an interrupt means: the process ends when its requests close, however the runner ends.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_IMPORT_ROOT, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, process_group=0
        )
        self.requests = Connection(os.dup(self.process.stdin.fileno()), readable=False)
        self.results = Connection(os.dup(self.process.stdout.fileno()), writable=False)
        self.process.stdin.close()
        self.process.stdout.close()
        self.pending: collections.deque[Item] = collections.deque()
        self.ready = False

    def send(self, message) -> None:
        try:
            self.requests.send(message)
        except OSError:  # the process is gone: receiving says so
            pass

    def close_requests(self) -> None:
        """Ends the process: it exits once it has answered what it was sent."""
        self.requests.close()

    def wait(self) -> None:
        """Waits for the process to exit (killing it after 5 s), then closes its results."""
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.results.close()


_STARTED_AHEAD: list[_Worker] = []  # started by started_ahead, not yet taken by a pool


@contextlib.contextmanager
def started_ahead(processes: int) -> Iterator[None]:
    """Starts `processes` converting processes for the pools made in the block (ConvertPool takes
    them before starting any of its own); when the block ends, ends those no pool took (the run
    failed, or needed fewer)."""
    _STARTED_AHEAD.extend(_Worker() for _ in range(processes))
    try:
        yield
    finally:
        unused = _STARTED_AHEAD[:]
        del _STARTED_AHEAD[:]
        _stop_all(unused)


def _stop_all(workers: list[_Worker]) -> None:
    """Ends the processes all at once: each one's interpreter takes a while to exit."""
    for worker in workers:
        worker.close_requests()
    for worker in workers:
        worker.wait()


class ConvertPool:
    """ImageConverter.convert in `processes` processes: `submit` items, take their `results`."""

    # Items sent ahead to each process, topped up as it answers: enough that none waits while the
    # bundle thread, which shares the cores with them, is between batches; few enough that at the
    # end no process still has a queue while the others have nothing left.
    SENT_AHEAD = 8

    def __init__(self, processes: int, settings: ImageSettings):
        if processes < 1:
            raise ValueError("processes must be >= 1")
        self._settings = settings
        self._answers = selectors.DefaultSelector()  # the processes' results, waited on together
        self._backlog: collections.deque[Item] = collections.deque()  # submitted, not yet sent
        self._workers = [self._start() for _ in range(processes)]

    def _start(self) -> _Worker:
        worker = _STARTED_AHEAD.pop() if _STARTED_AHEAD else _Worker()
        worker.send(self._settings)
        self._answers.register(worker.results, selectors.EVENT_READ, worker)
        return worker

    @property
    def pending(self) -> int:
        return len(self._backlog) + sum(len(worker.pending) for worker in self._workers)

    @property
    def queue_depth(self) -> int:
        """How many items to keep in flight: every process's items sent ahead."""
        return self.SENT_AHEAD * len(self._workers)

    def submit(self, items: list[Item]) -> None:
        """Queues the items; each process is sent a few at a time, as it answers."""
        self._backlog.extend(items)
        for worker in self._workers:
            self._top_up(worker)

    def _top_up(self, worker: _Worker) -> None:
        if self._backlog and len(worker.pending) <= self.SENT_AHEAD // 2:
            count = min(self.SENT_AHEAD - len(worker.pending), len(self._backlog))
            self._send(worker, [self._backlog.popleft() for _ in range(count)])

    def _send(self, worker: _Worker, items: list[Item]) -> None:
        worker.pending.extend(items)
        worker.send(items)

    def results(self, at_most_pending: int = 0) -> Iterator[tuple]:
        """(outcome, bytes read) of converted items, as they come, until at most `at_most_pending`
        items are still converting. Raises what a conversion raised."""
        while self.pending > at_most_pending:
            for answered, _ in self._answers.select():
                yield from self._receive(answered.data)

    def _receive(self, worker: _Worker) -> Iterator[tuple]:
        """What `worker` answered next, or, if it died, the dead letter of the source it was
        converting, its other items going to a fresh process."""
        try:
            result = worker.results.recv()
        except (EOFError, OSError):
            yield from self._replace(worker)
            return
        if result == _READY:
            worker.ready = True
            return
        worker.pending.popleft()
        self._top_up(worker)
        if isinstance(result, Exception):
            raise result
        yield result

    def _replace(self, dead: _Worker) -> Iterator[tuple]:
        self._answers.unregister(dead.results)
        _stop_all([dead])
        if not dead.ready:
            self._workers.remove(dead)
            raise ProcessFailed(
                f"a converting process exited with {dead.process.returncode} before it started (its errors are above)"
            )
        fresh = self._start()
        self._workers[self._workers.index(dead)] = fresh
        if dead.pending:
            culprit, _ = dead.pending.popleft()
            yield DeadLetter(culprit.uri, "decode", CRASHED), 0
        if dead.pending:
            self._send(fresh, list(dead.pending))
        self._top_up(fresh)

    def release_parts(self) -> None:
        """Has every process close the parts it appended to (call once their results are in)."""
        for worker in self._workers:
            worker.send(_RELEASE)

    def shutdown(self) -> None:
        """Ends every process."""
        workers, self._workers = self._workers, []
        for worker in workers:
            self._answers.unregister(worker.results)
        _stop_all(workers)
        self._answers.close()


if __name__ == "__main__":  # a converting process: results on a copy of stdout, stdout itself to stderr
    _results = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    _serve(Connection(os.dup(0), writable=False), _results)
    # Without the interpreter's teardown, which the runner would wait for: records went out through
    # os.write, so only the log's streams hold anything buffered.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
