"""A test that could hang (a blocked open, an endless read, a quadratic check) ends in
TimeoutError instead: `with alarm(seconds, what):` around it, in the main thread."""

from __future__ import annotations

import contextlib
import signal
import time


@contextlib.contextmanager
def alarm(seconds: int, what: str):
    """The timer it arms is the one pytest-timeout arms for the whole test (pytest.ini): that one
    goes on afterwards with the time it had left."""

    def expire(signum, frame):
        raise TimeoutError(f"{what}: still working after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))
