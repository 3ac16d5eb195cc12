"""One switch turns Beam's start-up patches on and off (pipeline.beam_patches), and they turn
themselves off, saying so once, on a Beam release they were not checked against. Both states are
tested here whichever state the suite runs in; the patches' own tests (test_beam_lookups,
test_unused_modules) run only where they are on."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest

from pipeline import beam_patches
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[2]
PATCHES = {"pipeline.beam_lookups", "pipeline.unused_modules"}
CHECKED_AGAINST = "checked against Beam"  # in the warning that the patches are off on this Beam

# `python -m pipeline ARGS` with the patches checked against Beam sys.argv[1] (the real release if
# empty), printing at exit what the run made of Beam.
_PROBE = (
    "import atexit, json, sys\n"
    "from pipeline import beam_patches\n"
    "beam_patches.CHECKED_BEAM = sys.argv[1] or beam_patches.CHECKED_BEAM\n"
    "def state():\n"
    "    from apache_beam.options.pipeline_options import PipelineOptions\n"
    "    from apache_beam.transforms import core\n"
    "    lookups = (core.get_function_args_defaults, PipelineOptions.view_as)\n"
    "    print('STATE', json.dumps({\n"
    "        'gcs_loaded': 'apache_beam.io.gcp.gcsfilesystem' in sys.modules,\n"
    "        'lookups_remembered': [f.__module__ == 'pipeline.beam_lookups' for f in lookups],\n"
    "    }))\n"
    "atexit.register(state)\n"
    "sys.argv = ['pipeline', *sys.argv[2:]]\n"
    "from pipeline.__main__ import main\n"
    "main()\n"
)


@pytest.mark.parametrize(
    ("value", "on"),
    [(None, True), ("on", True), ("1", True), ("off", False), (" OFF ", False), ("0", False), ("false", False)],
)
def test_the_switch(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(beam_patches.SWITCH, raising=False)
    else:
        monkeypatch.setenv(beam_patches.SWITCH, value)
    assert beam_patches.switched_on() is on


def _imported(path: pathlib.Path) -> set[str]:
    """The modules a file imports (`from pipeline import beam_lookups` counts as
    pipeline.beam_lookups)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_nothing_but_the_switch_applies_them():
    code = [
        p for folder in ("core", "pipeline", "transforms", "trainer", "scripts") for p in (REPO / folder).rglob("*.py")
    ]
    importers = {str(p.relative_to(REPO)) for p in code if _imported(p) & PATCHES}
    assert importers == {"pipeline/beam_patches.py"}


def _convert(tmp_path: pathlib.Path, switch: str, checked_beam: str = "") -> tuple[dict, str]:
    """A local conversion of the bundled images with the patches `switch`ed: what it made of Beam,
    and its log."""
    environ = {**os.environ, "PYTHONPATH": str(REPO), beam_patches.SWITCH: switch}
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, checked_beam, "--input", str(REPO / "sample" / "images"), "--output", str(out)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["written"] == counts["listed"] > 0 and counts["errors"] == 0
    [line] = [line for line in result.stdout.splitlines() if line.startswith("STATE ")]
    return json.loads(line.removeprefix("STATE ")), result.stderr


def test_on_both_patches_apply(tmp_path):
    if not beam_patches.fit_this_beam():
        pytest.skip(f"this Beam is not the release the patches were checked against ({beam_patches.CHECKED_BEAM})")
    state, log = _convert(tmp_path, "on")
    assert state == {"gcs_loaded": False, "lookups_remembered": [True, True]}
    assert CHECKED_AGAINST not in log


def test_off_beam_runs_as_it_is(tmp_path):
    state, log = _convert(tmp_path, "off")
    assert state == {"gcs_loaded": True, "lookups_remembered": [False, False]}
    assert CHECKED_AGAINST not in log


def test_on_another_beam_they_turn_themselves_off_saying_so_once(tmp_path):
    state, log = _convert(tmp_path, "on", checked_beam="2.0")
    assert state == {"gcs_loaded": True, "lookups_remembered": [False, False]}
    [warning] = [line for line in log.splitlines() if CHECKED_AGAINST in line]
    assert f"{CHECKED_AGAINST} 2.0 only" in warning and beam_patches.SWITCH in warning
