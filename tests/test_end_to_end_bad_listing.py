"""End to end: input the listing cannot turn into sources, and CSV files that cannot be read to
their end. Nothing may vanish from the run's accounting: an unreadable class folder, an unreadable
folder a CSV pattern could match files in, and a file name that is not UTF-8 are dead letters
counted as listed; a truncated .csv.gz fails the run."""

from __future__ import annotations

import csv
import gzip
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from pipeline.cli import main
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from transforms.tabular import ReadCsvRows

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample"
DROP_READ_CAPABILITIES = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def _images(root: pathlib.Path, per_class: int = 4) -> pathlib.Path:
    for label in ("circle", "square", "triangle"):
        (root / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:per_class]:
            shutil.copy(path, root / label / path.name)
    return root


def _check_accounting(out: pathlib.Path):
    manifest = load_manifest(out)
    counts = manifest.counts
    assert counts.reconciles()
    assert counts.listed == manifest.listing.sources  # the planner and the job saw the same input
    return manifest


def test_non_utf8_file_name_is_a_dead_letter_not_a_crash(tmp_path):
    root = _images(tmp_path / "in")
    with open(os.path.join(str(root / "circle"), os.fsdecode(b"bad\xff.jpg")), "wb") as f:
        f.write((root / "circle" / "0001.jpg").read_bytes())
    out = tmp_path / "out"
    assert main(["--input", str(root), "--output", str(out), "--max_error_fraction", "0.5"]) == 0
    manifest = _check_accounting(out)
    assert (manifest.counts.written, manifest.counts.errors) == (12, 1)
    assert read_dead_letters(out) == [
        {"source": str(root / "circle") + "/bad\\xff.jpg", "stage": "list", "reason": "file name is not valid UTF-8"}
    ]


def _unprivileged_prefix() -> list[str] | None:
    """How to run a command that chmod 000 stops from listing a folder: as it is when this process
    is not root; as root only without CAP_DAC_READ_SEARCH/CAP_DAC_OVERRIDE (setpriv); None when
    neither works here."""
    probe = tempfile.mkdtemp()
    try:
        os.chmod(probe, 0)
        for prefix in ([], DROP_READ_CAPABILITIES):
            if prefix and shutil.which(prefix[0]) is None:
                continue
            denied = subprocess.run(
                [*prefix, sys.executable, "-c", f"import os; os.listdir({probe!r})"], capture_output=True
            )
            if denied.returncode != 0 and b"PermissionError" in denied.stderr:
                return prefix
        return None
    finally:
        os.chmod(probe, 0o700)
        os.rmdir(probe)


def test_unreadable_class_folder_is_reported_and_counted(tmp_path):
    prefix = _unprivileged_prefix()
    if prefix is None:
        pytest.skip(
            "no way here to make a folder unreadable to the pipeline (root, and setpriv cannot drop the capability)"
        )
    root = _images(tmp_path / "in")
    (root / "hidden" / "deeper").mkdir(parents=True)
    shutil.copy(root / "circle" / "0001.jpg", root / "hidden" / "deeper" / "x.jpg")
    (root / "hidden").chmod(0)
    try:
        out = tmp_path / "out"
        run = subprocess.run(
            [
                *prefix,
                sys.executable,
                "-m",
                "pipeline",
                "--input",
                str(root),
                "--output",
                str(out),
                "--max_error_fraction",
                "0.5",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        manifest = _check_accounting(out)
        assert (manifest.counts.written, manifest.counts.errors) == (12, 1)
        assert manifest.errors_by_stage == {"list": 1}
        [letter] = read_dead_letters(out)
        assert (letter["source"], letter["stage"]) == (str(root / "hidden"), "list")
        assert "PermissionError" in letter["reason"]

        # Within the default budget (1%), the same input fails the run instead of passing silently.
        strict = subprocess.run(
            [*prefix, sys.executable, "-m", "pipeline", "--input", str(root), "--output", str(tmp_path / "strict")],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
        assert strict.returncode == 1, "rejected: over the error budget"
        assert not (tmp_path / "strict" / "manifest.json").exists()
    finally:
        (root / "hidden").chmod(0o755)


def test_unreadable_folder_a_csv_pattern_reaches_is_reported_and_counted(tmp_path):
    """`root/**/*.csv` could match files in a sub-folder the run cannot list, which Beam's match
    leaves out without a word: it is one `list` dead letter naming the folder, counted as listed,
    and every row of the readable folders is written."""
    prefix = _unprivileged_prefix()
    if prefix is None:
        pytest.skip(
            "no way here to make a folder unreadable to the pipeline (root, and setpriv cannot drop the capability)"
        )
    root, out = tmp_path / "in", tmp_path / "out"
    for folder in ("a", "b/c", "hidden"):
        (root / folder).mkdir(parents=True)
    expected = []
    for folder, name in (("a", "part-000.csv"), ("b/c", "part-001.csv")):
        shutil.copy(SAMPLE / "tabular" / name, root / folder / name)
        expected += [row["id"] for row in csv.DictReader((root / folder / name).read_text().splitlines())]
    header = (SAMPLE / "tabular" / "part-000.csv").read_text().splitlines()[0]
    (root / "hidden" / "part-002.csv").write_text(f"{header}\n99999,1,1,1,1,alpha,true,0\n")
    argv = ["--kind", "csv", "--input", f"{root}/**/*.csv", "--output", str(out)]
    (root / "hidden").chmod(0)
    try:
        run = subprocess.run(
            [*prefix, sys.executable, "-m", "pipeline", *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
    finally:
        (root / "hidden").chmod(0o755)
    assert run.returncode == 0, run.stdout + run.stderr
    manifest = load_manifest(out)
    written = sorted(str(r["id"]) for split in manifest.splits for r in read_split(out, split))
    assert written == sorted(expected)
    counts = manifest.counts
    assert counts.reconciles()
    assert (counts.listed, counts.written, counts.errors) == (len(expected) + 1, len(expected), 1)
    assert manifest.errors_by_stage == {"list": 1}
    [letter] = read_dead_letters(out)
    assert (letter["source"], letter["stage"]) == (str(root / "hidden"), "list")
    assert letter["reason"].startswith("cannot list this folder: PermissionError")
    assert letter["reason"].endswith("; it may hold files the pattern matches")


def _tables(root: pathlib.Path) -> pathlib.Path:
    """Three good .csv.gz files and a fourth cut in the middle of its compressed stream."""
    root.mkdir(parents=True)
    lines = (SAMPLE / "tabular" / "part-000.csv").read_text().splitlines(keepends=True)
    for i in range(4):
        data = gzip.compress("".join(lines).encode())
        (root / f"part-{i}.csv.gz").write_bytes(data[: len(data) // 2] if i == 3 else data)
    return root


def test_truncated_csv_gz_fails_the_run(tmp_path):
    root = _tables(tmp_path / "in")
    out = tmp_path / "out"
    code = main(["--kind", "csv", "--input", str(root / "*.csv.gz"), "--output", str(out)])
    assert code == 3, "failed while running"
    # A failed run removes what it wrote, Beam's empty temporary folders included, then the folder it made.
    assert not out.exists()


def test_truncated_csv_gz_error_names_the_file(tmp_path):
    root = _tables(tmp_path / "in")
    truncated = str(root / "part-3.csv.gz")
    header = tuple((SAMPLE / "tabular" / "part-000.csv").read_text().splitlines()[0].split(","))
    with pytest.raises(Exception, match=f"{truncated} cannot be read to its end .*EOFError"):
        with TestPipeline() as p:
            _ = (
                p
                | beam.Create([truncated])
                | beam.Map(lambda path: beam.io.filesystem.FileMetadata(path, 0))
                | beam.ParDo(ReadCsvRows(str(root), header, (("train", 1.0),)))
            )
