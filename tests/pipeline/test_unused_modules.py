"""A local run of local data starts without Beam's Google Cloud modules and the libraries of its
other integrations, and every other command line keeps them (pipeline.unused_modules). Skipped
where the patches are off (pipeline.beam_patches)."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from pipeline import beam_patches
from pipeline.unused_modules import STILL_IMPORTABLE, needs_cloud
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

if not beam_patches.wanted():
    pytest.skip("Beam's start-up patches are off here (pipeline.beam_patches)", allow_module_level=True)

REPO = pathlib.Path(__file__).resolve().parents[2]
# What a local run should not load, spelled out here rather than taken from the module under test.
UNUSED = ("apache_beam.io.gcp", "google.cloud", "apitools", "pandas", "pyarrow", "pymongo", "bson")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--input", "photos", "--output", "out"],
        ["convert", "--input=photos", "--kind", "images"],
        ["refresh", "--input", "photos", "--output", "versions", "--keep", "3"],
        ["--debug", "refresh", "--input", "photos", "--debug"],
        ["--kind", "csv", "--input", "tables/*.csv"],
        ["--direct_running_mode", "in_memory", "--temp_location", "/tmp/beam"],
    ],
)
def test_local_command_lines_leave_the_modules_out(argv):
    assert not needs_cloud(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--input", "gs://bucket/photos"],
        ["--input", "photos", "--output=gs://bucket/out"],
        ["--input", "photos", "--temp_location", "gs://bucket/tmp"],
        ["--input", "photos", "--runner", "DirectRunner"],
        ["--input", "photos", "--runner=DataflowRunner"],
        ["--input", "photos", "--direct_num_workers", "2"],
        ["--input", "rows.csv", "--kind", "image_csv"],
        ["--input", "rows.csv", "--ki=image_csv"],  # abbreviated, as argparse takes it
        ["inspect", "out"],
        ["--debug", "inspect", "out"],
        ["--num_shards", "many"],  # the command itself reports the bad value
    ],
)
def test_command_lines_that_may_touch_the_cloud_keep_them(argv):
    assert needs_cloud(argv)


def test_a_bad_command_line_is_left_to_the_command_to_report(capsys):
    assert needs_cloud(["--num_shards", "many", "--kind", "nonsense"])
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("config", "flags", "cloud"),
    [
        ("kind: images\ninput: photos\noutput: out\n", [], False),
        ("", [], False),
        ("output: gs://bucket/out\n", [], True),
        ("input: gs://bucket/photos\n", ["--input", "photos"], False),  # the flag wins
        ("kind: image_csv\ninput: rows.csv\n", [], True),
        ("kind: image_csv\n", ["--kind", "images"], False),
        ("- not\n- a mapping\n", [], True),
        ("input: [unclosed\n", [], True),
    ],
)
def test_a_config_file_counts_as_its_settings(tmp_path, config, flags, cloud):
    path = tmp_path / "settings.yaml"
    path.write_text(config)
    assert needs_cloud(["--conf", str(path), *flags]) is cloud  # abbreviated too


def test_an_unreadable_config_keeps_them(tmp_path):
    """The command, not this, refuses the file: missing, not UTF-8, not YAML."""
    assert needs_cloud(["--config", str(tmp_path / "missing.yaml")])
    for content in (b"kind: csv\n\xff: 1\n", b"kind: [\n"):
        (tmp_path / "bad.yaml").write_bytes(content)
        assert needs_cloud(["--config", str(tmp_path / "bad.yaml")])


def test_a_config_that_is_a_fifo_keeps_them_without_waiting_or_importing_beam(tmp_path):
    """Read before Beam is imported: a FIFO's open would wait for a writer, and the command, not
    this, says what is wrong with the file. In a process with a time limit, so a hang fails."""
    os.mkfifo(tmp_path / "settings.yaml")
    code = (
        "import sys\n"
        "from pipeline.unused_modules import needs_cloud\n"
        "print(needs_cloud(['--config', sys.argv[1]]), 'apache_beam' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "settings.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=True,
    )
    assert result.stdout.split() == ["True", "False"]


_LOADED = (
    "import atexit, sys\n"
    "before = set(sys.modules)\n"  # google.cloud itself: a namespace package that site's .pth files make
    "loaded = lambda: sorted(m for m in set(sys.modules) - before if m.startswith({prefixes}))\n"
    "atexit.register(lambda: print('LOADED', loaded()))\n"
    "sys.argv[0] = 'pipeline'\n"
    "from pipeline.__main__ import main\n"
    "main()\n"
)


def _run_entry(*args: str) -> subprocess.CompletedProcess:
    """The process entry, as `python -m pipeline ARGS` runs it, printing at exit which modules of
    UNUSED the process loaded."""
    code = _LOADED.format(prefixes=UNUSED)
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("unused_modules") / "photos"
    for label_dir in sorted((REPO / "sample" / "images").iterdir()):
        (folder / label_dir.name).mkdir(parents=True)
        for path in sorted(label_dir.iterdir())[:3]:
            shutil.copy(path, folder / label_dir.name / path.name)
    return folder


def _loaded(result: subprocess.CompletedProcess) -> list[str]:
    [line] = [line for line in result.stdout.splitlines() if line.startswith("LOADED ")]
    return ast.literal_eval(line.removeprefix("LOADED "))


@pytest.mark.parametrize("graph", ["images", "images_through_write_to_tfrecord", "csv"])
def test_a_local_run_converts_everything_without_them(photos, tmp_path, graph):
    """Each graph a lean local run builds: images written as they are made, images through
    WriteToTFRecord (whose expansion imports Beam's Pub/Sub module), tabular rows (the bundled
    sample)."""
    out, config = tmp_path / "out", tmp_path / "config.yaml"
    config.write_text(f"image: {{local_write_while_reading: {str(graph == 'images').lower()}}}\n")
    source = ["--kind", "csv"] if graph == "csv" else ["--input", str(photos)]
    result = _run_entry(*source, "--output", str(out), "--config", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    assert set(_loaded(result)) <= set(STILL_IMPORTABLE), _loaded(result)
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["written"] == counts["listed"] > 0 and counts["errors"] == 0
    if graph != "csv":
        assert counts["listed"] == sum(1 for p in photos.rglob("*") if p.is_file())
    assert "GCSFileSystem" not in result.stderr  # Beam's warning for a file system that fails to import
    assert "bson" not in result.stderr  # nor its MongoDB I/O's


def test_a_run_on_another_runner_keeps_them(photos, tmp_path):
    result = _run_entry("--input", str(photos), "--output", str(tmp_path / "out"), "--direct_num_workers", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = set(_loaded(result))
    assert {"apache_beam.io.gcp.gcsfilesystem", "google.cloud.storage", "apitools.base.py"} <= loaded
    assert {"pyarrow", "pymongo", "bson"} <= loaded  # installed with Beam here (pandas is not)
