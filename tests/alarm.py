"""A test that could hang (a blocked open, an endless read, a quadratic check) ends in
TimeoutError instead: `with alarm(seconds, what):` around it, in the main thread."""

from __future__ import annotations

import contextlib
import signal


@contextlib.contextmanager
def alarm(seconds: int, what: str):
    def expire(signum, frame):
        raise TimeoutError(f"{what}: still working after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
