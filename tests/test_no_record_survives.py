"""One clear outcome: when no source becomes a record (a header-only CSV, every image broken, every
row bad, every image missing), the run is rejected (exit 1) with the project's reasons, once, and
nothing from Beam's retries or tracebacks; a dataset without records is never published."""

from __future__ import annotations

import pathlib

import pytest

from tests.dataset_reader import load_rejected
from tests.subprocess_limits import run_pipeline
from tests.test_publication import REPO

RUNNERS = {"lean": [], "parallel": ["--direct_num_workers", "2"]}


def header_only(tmp_path: pathlib.Path) -> list[str]:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.csv").write_text("id,x,name\n")
    return ["--kind", "csv", "--input", f"{tmp_path}/in/*.csv"]


def bad_rows(tmp_path: pathlib.Path) -> list[str]:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.csv").write_text("id,x\n1,a\n2,b\n3,c\n")
    (tmp_path / "config.yaml").write_text("kind: csv\ncsv: {schema: {x: int64}}\nmax_error_fraction: 1\n")
    return ["--config", str(tmp_path / "config.yaml"), "--input", f"{tmp_path}/in/*.csv"]


def broken_images(tmp_path: pathlib.Path) -> list[str]:
    for label in ("cat", "dog"):
        (tmp_path / "in" / label).mkdir(parents=True)
        (tmp_path / "in" / label / "a.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really")
    return ["--input", str(tmp_path / "in")]


def missing_images(tmp_path: pathlib.Path) -> list[str]:
    (tmp_path / "images.csv").write_text("image_uri,label\nimg/a.jpg,cat\nimg/b.jpg,dog\n")
    return ["--kind", "image_csv", "--input", str(tmp_path / "images.csv")]


@pytest.mark.parametrize(
    "make_input, runner",
    [
        (header_only, "lean"),
        (header_only, "parallel"),
        (bad_rows, "lean"),
        (broken_images, "lean"),
        (broken_images, "parallel"),
        (missing_images, "lean"),
    ],
)
def test_a_run_without_records_is_rejected_in_the_projects_words_only(tmp_path, make_input, runner):
    out = tmp_path / "out"
    done = run_pipeline([*make_input(tmp_path), "--output", out, *RUNNERS[runner]], cwd=REPO)
    assert done.returncode == 1, done.stderr[-3000:]
    for noise in ("Traceback", "Exception at bundle", "Giving up", "AssertionError"):
        assert noise not in done.stderr, done.stderr[-3000:]
    assert not (out / "manifest.json").exists()
    reasons = load_rejected(out).rejected
    assert any(reason.startswith("no source became a record") for reason in reasons), reasons
