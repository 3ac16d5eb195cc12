"""`python -m tests.kill_at MODULE:ATTRIBUTE N -- ARGS...`: runs `python -m pipeline ARGS...` and
SIGKILLs the whole process the moment MODULE.ATTRIBUTE is called for the N-th time (1-based), as
a crash or `kill -9` would at that point: no clean-up, no `finally`, no lease release.

The local runner runs the job in this process, so any function of the pipeline, in the launcher or
in the job, is a kill point (e.g. `pipeline.storage:copy 2`: halfway through a promotion).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys


def arm(target: str, nth: int) -> None:
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
            sys.stderr.write(f"kill_at: SIGKILL at call {nth} of {target}\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def main() -> None:
    target, nth, separator, *args = sys.argv[1:]
    assert separator == "--", __doc__
    arm(target, int(nth))
    from pipeline.cli import main as pipeline_main

    sys.exit(pipeline_main(args))


if __name__ == "__main__":
    main()
