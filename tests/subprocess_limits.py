"""How long a test waits for a process it started: long enough that a CI runner busy with other
jobs (2 cores shared by several suites) never trips it, so a limit that fires means a hang, not a
slow machine. A test that measures how quickly something ends asserts that itself, not with this."""

import os
import subprocess
import sys

SUBPROCESS_TIMEOUT = 900  # seconds


def run_pipeline(argv, **options) -> subprocess.CompletedProcess:
    """`python -m pipeline ARGV` as a process within SUBPROCESS_TIMEOUT, its output captured as
    text; `options` go to subprocess.run (cwd, env)."""
    return _run("pipeline", argv, **options)


def run_trainer(argv, **options) -> subprocess.CompletedProcess:
    """`python -m trainer ARGV` as a process, as a user runs it: TF_CPP_MIN_LOG_LEVEL left for the
    trainer to set (core.contract.tf_import), so that what TensorFlow writes reaches the output as
    it would reach a terminal; `options` go to subprocess.run (cwd, env)."""
    env = {k: v for k, v in options.pop("env", os.environ).items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return _run("trainer", argv, env=env, **options)


def _run(module: str, argv, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
        **options,
    )
