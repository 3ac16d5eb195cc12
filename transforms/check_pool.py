"""`check_image` in worker processes, for local runs.

On a local runner all of ReadImages runs in one Python process, and Pillow holds the GIL for part
of every decode, so threads alone cannot keep many cores busy. Here each checking process serves
requests over its own pipes: a ReadImages thread sends a process the file's bytes and waits
(without the GIL) for the checked image, which holds only the dimensions unless the image had to
be re-encoded.

On Dataflow each core already runs its own SDK process, so the checks stay in-process there
(`check_processes` = 0 in ReadImages).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

import transforms
from transforms.image_check import BadImage, CheckedImage, Encoding, check_image

# Where `transforms` is imported from, for the checking processes (a checkout or site-packages).
_IMPORT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(transforms.__file__)))


def usable_cores() -> int:
    """The cores this process may run on (taskset, cgroup cpusets), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _serve(requests: Connection, results: Connection) -> None:
    """A checking process: (max_pixels, encoding) first, then an image's bytes in, the
    CheckedImage (without the bytes, unless they were re-encoded) or the exception check_image
    raised out, in order, until the pipe closes."""
    max_pixels, encoding = requests.recv()
    while True:
        try:
            data = requests.recv()
        except EOFError:
            return
        try:
            result = check_image(data, max_pixels, encoding)
            if not result.converted:  # the caller has these bytes: only the dimensions go back
                result = dataclasses.replace(result, data=b"")
        except Exception as e:  # raised again by the caller, as if the check had run there
            result = e
        results.send(result)


CRASHED = "the image decoder crashed on it (its checking process died)"


class _Crashed(Exception):
    """The checking process died: while checking this request (`culprit`), or before it got to it."""

    def __init__(self, culprit: bool):
        super().__init__("checking process died")
        self.culprit = culprit


class _Worker:
    """One checking process and the requests sent to it, answered in the order they were sent.
    A receiving thread completes them, so the process goes on to the next queued request without
    waiting for the thread that asked to get the GIL back."""

    def __init__(self, max_pixels: int, encoding: Encoding):
        # A fresh interpreter (`python -m transforms.check_pool`), talking over its stdin and
        # stdout: it inherits none of the runner's threads, locks or clients, as a fork would,
        # and imports none of the job's modules, as multiprocessing's spawn would (__main__).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_IMPORT_ROOT, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self._requests = Connection(os.dup(self.process.stdin.fileno()), readable=False)
        self._results = Connection(os.dup(self.process.stdout.fileno()), writable=False)
        self.process.stdin.close()
        self.process.stdout.close()
        self._requests.send((max_pixels, encoding))
        self._lock = threading.Lock()
        self.pending: collections.deque[concurrent.futures.Future] = collections.deque()
        self.alive = True
        threading.Thread(target=self._receive, daemon=True, name="check-results").start()

    def submit(self, data: bytes) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if not self.alive:
                future.set_exception(_Crashed(culprit=False))
                return future
            self.pending.append(future)
            try:
                self._requests.send(data)
            except OSError:  # the process is gone: _receive fails what is pending
                pass
        return future

    def _receive(self) -> None:
        while True:
            try:
                result = self._results.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future = self.pending.popleft()
            future.set_result(result)
        with self._lock:
            self.alive = False
            pending, self.pending = list(self.pending), collections.deque()
        for i, future in enumerate(pending):
            future.set_exception(_Crashed(culprit=i == 0))

    def stop(self) -> None:
        """Closes the requests (the process ends, closing the results: the receiving thread ends)."""
        self._requests.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class CheckPool:
    """`check(data)` = check_image(data, max_pixels, encoding) in one of `processes` processes; for
    many threads at once. Each process has up to QUEUED_PER_PROCESS requests queued, so it does not
    wait for the threads between two checks.

    A process that dies while checking (a decoder crash on hostile input takes the whole process
    with it) is replaced; the image it was checking becomes a BadImage, and the requests queued
    behind it go to a live process."""

    QUEUED_PER_PROCESS = 2

    def __init__(self, processes: int, max_pixels: int, encoding: Encoding):
        if processes < 1:
            raise ValueError("processes must be >= 1")
        self._settings = (max_pixels, encoding)
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(self.QUEUED_PER_PROCESS * processes)
        self._workers = [_Worker(*self._settings) for _ in range(processes)]

    def check(self, data: bytes) -> CheckedImage:
        with self._slots:
            while True:
                worker = self._least_busy()
                try:
                    result = worker.submit(data).result()
                    break
                except _Crashed as crash:
                    self._replace(worker)
                    if crash.culprit:
                        raise BadImage("decode", CRASHED) from None
        if isinstance(result, Exception):
            raise result
        return result if result.converted else dataclasses.replace(result, data=data)

    def _least_busy(self) -> _Worker:
        with self._lock:
            return min(self._workers, key=lambda worker: len(worker.pending))

    def _replace(self, dead: _Worker) -> None:
        with self._lock:
            if dead not in self._workers:
                return  # another thread replaced it
            self._workers[self._workers.index(dead)] = _Worker(*self._settings)
        dead.stop()

    def shutdown(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()


if __name__ == "__main__":  # a checking process: results on a copy of stdout, stdout itself to stderr
    _results = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    _serve(Connection(os.dup(0), writable=False), _results)
