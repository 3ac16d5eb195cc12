"""`python -m tests.kill_at MODULE:ATTRIBUTE N [MODULE:ATTRIBUTE N ...] -- ARGS...`: runs `python -m
pipeline ARGS...` and SIGKILLs the whole process the moment MODULE.ATTRIBUTE is called for the N-th
time (1-based), as a crash or `kill -9` would at that point: no clean-up, no `finally`, no lease
release. With `--interrupt` first, each target sends a SIGINT (a Ctrl-C) instead, and the run goes on.

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
            sys.stderr.write(f"kill_at: {signal.Signals(signal_number).name} at call {nth} of {target}\n")
            sys.stderr.flush()
            if signal_number == signal.SIGINT:  # to the main thread, where Python handles it (see main)
                signal.pthread_kill(threading.main_thread().ident, signal_number)
            else:
                os.kill(os.getpid(), signal_number)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


_MODES = {"--interrupt": signal.SIGINT, "--stop": signal.SIGSTOP}


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
    for target, nth in zip(targets[::2], targets[1::2], strict=True):
        arm(target, int(nth), signal_number)
    from pipeline.cli import main as pipeline_main

    sys.exit(pipeline_main(args))


if __name__ == "__main__":
    main()
