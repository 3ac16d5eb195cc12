"""Stopping a local run's own threads when its launcher gives up on the run (Ctrl-C, an error on
the main thread), before it removes what the run wrote.

A local runner runs the job on threads an interrupt never reaches: they would go on writing after
the launcher's clean-up. So the launcher raises a process-wide flag (request_stop) that the
long-running DoFns `check` between elements and results. Stopped is a BaseException, as
KeyboardInterrupt is: runners retry a bundle that raised an Exception, and would write it again.
The thread it ends ends without a traceback. A remote runner's workers never see the flag: the
launcher cleans up after none of them.
"""

from __future__ import annotations

import threading


class Stopped(BaseException):
    """Raised in a local run's threads once its launcher has stopped the run."""

    def __init__(self, message: str = "the run was stopped by its launcher"):
        super().__init__(message)  # one argument: Beam re-raises it with the step's name added


_STOP = threading.Event()
_hook_lock = threading.Lock()


def check() -> None:
    """Raises Stopped once the run was stopped."""
    if _STOP.is_set():
        raise Stopped()


def request_stop() -> None:
    """From now on every `check` raises Stopped, and a thread that Stopped ends ends quietly."""
    with _hook_lock:
        if not isinstance(threading.excepthook, _QuietStops):
            threading.excepthook = _QuietStops(threading.excepthook)
    _STOP.set()


def reset() -> None:
    """A new run in this process (tests run several)."""
    _STOP.clear()


class _QuietStops:
    """threading.excepthook that says nothing of a thread ended by Stopped."""

    def __init__(self, previous):
        self._previous = previous

    def __call__(self, args) -> None:
        if not (isinstance(args.exc_type, type) and issubclass(args.exc_type, Stopped)):
            self._previous(args)
