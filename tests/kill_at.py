"""`python -m tests.kill_at MODULE:ATTRIBUTE N [MODULE:ATTRIBUTE N ...] -- ARGS...`: runs `python -m
pipeline ARGS...` and SIGKILLs the whole process the moment MODULE.ATTRIBUTE is called for the N-th
time (1-based), as a crash or `kill -9` would at that point: no clean-up, no `finally`, no lease
release. With `--interrupt` first, each target sends a SIGINT (a Ctrl-C) instead, and the run goes on; with
`--terminate`, a SIGTERM (a scheduler stopping the job), which the run handles (pipeline.ending).
With `--stop` first, each target stops the process (SIGSTOP, as a suspended laptop) until a SIGCONT.

The local runner runs the job in this process, so any function of the pipeline, in the launcher or
in the job, is a kill point (e.g. `core.storage:copy 2`: halfway through a promotion).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading


def arm(target: str, nth: int, signal_number: int = signal.SIGKILL) -> None:
    module_name, _, attribute = target.partition(":")
    owner = importlib.import_module(module_name)
    for part in attribute.split(".")[:-1]:
        owner = getattr(owner, part)
    name = attribute.split(".")[-1]
    original = getattr(owner, name)
    calls = 0

    def wrapper(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == nth:
            if signal_number == signal.SIGSTOP:
                with _RENEWALS:  # not in the middle of a lease renewal (see _stop_between_renewals)
                    _send(signal_number, nth, target)
            else:
                _send(signal_number, nth, target)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _send(signal_number: int, nth: int, target: str) -> None:
    """Says which signal goes (the line a test waits for), then sends it: a SIGINT or SIGTERM to the
    main thread, where Python handles it (see main), any other to the process."""
    sys.stderr.write(f"kill_at: {signal.Signals(signal_number).name} at call {nth} of {target}\n")
    sys.stderr.flush()
    if signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.pthread_kill(threading.main_thread().ident, signal_number)
    else:
        os.kill(os.getpid(), signal_number)


_MODES = {"--interrupt": signal.SIGINT, "--terminate": signal.SIGTERM, "--stop": signal.SIGSTOP}
_RENEWALS = threading.Lock()  # held by a lease renewal, and by a target while it stops the process


def _stop_between_renewals() -> None:
    """A process stopped in the middle of a lease renewal holds its output folder's lock, which
    keeps every other run out until it goes on (the lock's own guarantee). `--stop` is for the other
    case, a run stopped while it works: its targets stop the process between renewals."""
    from pipeline.lease import Lease

    renew = Lease.renew

    def renew_unless_stopping(self):
        with _RENEWALS:
            return renew(self)

    Lease.renew = renew_unless_stopping


def main() -> None:
    words = sys.argv[1:]
    signal_number = _MODES.get(words[0], signal.SIGKILL)
    words = words[1:] if words[0] in _MODES else words
    separator = words.index("--")
    targets, args = words[:separator], words[separator + 1 :]
    assert targets and len(targets) % 2 == 0, __doc__
    # Ctrl-C as in a terminal, also where the caller ignores SIGINT. It is sent to the main thread:
    # a kill() of this process from the job's thread a target runs on can be taken by that thread,
    # and the main thread, the only one that runs Python's handler, then learns of it only once its
    # wait for the job ends, after the run committed.
    if signal_number == signal.SIGINT:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal_number == signal.SIGSTOP:
        _stop_between_renewals()
    for target, nth in zip(targets[::2], targets[1::2], strict=True):
        arm(target, int(nth), signal_number)
    from pipeline.cli import main as pipeline_main

    sys.exit(pipeline_main(args))


if __name__ == "__main__":
    main()
