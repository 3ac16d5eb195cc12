"""Every command says how to use it: `python -m pipeline --help` lists the commands, one line each,
and `--debug`; each command answers `--help`; every script in scripts/ answers `--help` and `-h`
with its usage, exit 0, without a bucket and without doing work; the trainer's help comes without
TensorFlow's start-up."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from pipeline.cli import main
from pipeline.flags import COMMANDS, DEBUG_FLAG
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
HELP_FLAGS = ("--help", "-h")


def run(argv: list[str], cwd: pathlib.Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, check=False
    )


def test_the_top_level_help_lists_every_command_in_one_line_and_debug(tmp_path):
    """As the process starts it (pipeline.__main__), from anywhere."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for flag in HELP_FLAGS:
        shown = run([sys.executable, "-m", "pipeline", flag], tmp_path, env)
        assert shown.returncode == 0, shown.stderr
        for name, summary in COMMANDS.items():
            assert re.search(rf"^  {name} +{re.escape(summary)}$", shown.stdout, re.M), shown.stdout
        assert DEBUG_FLAG in shown.stdout and "--input" in shown.stdout  # and convert's flags: the default command
    assert not list(tmp_path.iterdir()), "help does no work"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_answers_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m pipeline{'' if command == 'convert' else ' ' + command} "), out
    assert DEBUG_FLAG in out


def library_modules() -> set[str]:
    """The .py files of scripts/ that only other scripts import (their modules): not commands."""
    sources = {p.stem: p.read_text() for p in SCRIPTS.glob("*.py")}
    imported = {
        name
        for name in sources
        for other, text in sources.items()
        if other != name and re.search(rf"^\s*(from {name} import|import {name}\b)", text, re.M)
    }
    return {f"{name}.py" for name in imported if 'if __name__ == "__main__"' not in sources[name]}


def scripts() -> list[str]:
    return sorted(p.name for p in SCRIPTS.iterdir() if p.is_file() and p.name not in library_modules())


@pytest.mark.parametrize("flag", HELP_FLAGS)
@pytest.mark.parametrize("script", scripts())
def test_every_script_answers_help_without_a_bucket_or_work(script, flag, tmp_path):
    """Run from an empty folder, with no PROJECT or BUCKET in the environment: a script that
    wrote anything or asked for a setting would fail here."""
    interpreters = {".sh": ["bash"], ".py": [sys.executable]}
    path = SCRIPTS / script
    assert path.suffix in interpreters, f"{script}: a script here is .sh or .py"
    env = {k: v for k, v in os.environ.items() if k not in ("PROJECT", "BUCKET", "REGION")}
    shown = run([*interpreters[path.suffix], str(path), flag], tmp_path, {**env, "PYTHON": sys.executable})
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert script in shown.stdout, f"{script} {flag} printed no usage naming it:\n{shown.stdout}"
    assert not list(tmp_path.iterdir()), "help does no work"


def test_the_sourced_setup_script_returns_after_its_help_leaving_the_shell_running(tmp_path):
    """`source scripts/setup_env.sh --help` in a terminal must not end the terminal's shell."""
    script = f"source {SCRIPTS / 'setup_env.sh'} --help; echo still running"
    shown = run(["bash", "-c", script], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "setup_env.sh" in shown.stdout and shown.stdout.endswith("still running\n"), shown.stdout


TRAINER_WITHOUT_TENSORFLOW = """
import runpy, sys
sys.argv = ["trainer", *sys.argv[1:]]
try:
    runpy.run_module("trainer", run_name="__main__")  # as `python -m trainer` runs it
except SystemExit as e:
    print("exit", e.code)
print("tensorflow" in sys.modules, "keras" in sys.modules)
"""


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["-h"], 0), (["--data", "d", "--epochs", "many"], 2)])
def test_the_trainer_answers_help_and_flag_mistakes_without_tensorflow(argv, code):
    shown = run([sys.executable, "-c", TRAINER_WITHOUT_TENSORFLOW, *argv], REPO)
    assert shown.stdout.endswith(f"exit {code}\nFalse False\n"), shown.stdout + shown.stderr
    if code == 0:
        assert "--data" in shown.stdout and "--model_dir" in shown.stdout
