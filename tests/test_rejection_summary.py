"""A rejected run tells what to do: each reason once, the first errors (source, stage, reason) from
the run's error report, where the whole report is, and the --max_error_fraction that would have let
its errors pass, which, given back to the command, does. A run that passes with errors shows its
first errors and where the report is too. The suggested budget is checked against the comparison
the run makes (Manifest.error_budget_exceeded) for every fraction a run can count."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
from decimal import Decimal

from hypothesis import example, given
from hypothesis import strategies as st

from core.contract.manifest import Counts, Manifest
from pipeline.publish import passing_budget
from pipeline.report import FIRST_ERRORS_SHOWN, first_errors
from tests import broken_images
from tests.dataset_reader import load_manifest, load_rejected, read_dead_letters
from tests.subprocess_limits import run_pipeline

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample" / "images"
BROKEN = {
    "circle/empty.jpg": broken_images.zero_bytes(),
    "circle/cut.jpg": broken_images.truncated_jpeg(),
    "square/page.jpg": broken_images.html_page(),
    "square/corrupt.png": broken_images.corrupt_png(),
    "square/cut.png": broken_images.truncated_png(),
    "circle/corrupt.jpg": broken_images.corrupt_jpeg(),
}


def manifest_of(errors: int, candidates: int, budget: float, written: int = 1, error_files=()) -> Manifest:
    return Manifest(
        kind="images",
        splits={},
        features={},
        counts=Counts(listed=candidates, written=written, converted=0, skipped=0, errors=errors),
        error_fraction=errors / candidates,
        max_error_fraction=budget,
        error_files=tuple(error_files),
    )


@given(st.integers(1, 10**9).flatmap(lambda candidates: st.tuples(st.integers(1, candidates), st.just(candidates))))
@example((5, 218))  # the issue's run: 2.29%
@example((1, 100))  # exactly a round budget
@example((1, 1))
def test_the_suggested_budget_passes_the_runs_own_check_and_is_round(counts):
    errors, candidates = counts
    fraction = errors / candidates
    suggested = passing_budget(fraction)
    assert not manifest_of(errors, candidates, float(suggested)).error_budget_exceeded, suggested
    value = Decimal(suggested)
    assert len(value.normalize().as_tuple().digits) <= 2, suggested  # round: two significant digits
    assert value - Decimal(repr(fraction)) < Decimal(repr(fraction)) / 10, suggested  # not absurdly larger
    assert 0 < value <= 1


def test_the_issues_example():
    assert passing_budget(5 / 218) == "0.023" and passing_budget(0.02) == "0.02" and passing_budget(1.0) == "1"


def broken_folder(root: pathlib.Path) -> pathlib.Path:
    """A few sample images per class and the BROKEN files: a few percent of sources fail."""
    source = root / "photos"
    for label in ("circle", "square", "triangle"):
        (source / label).mkdir(parents=True)
        for path in sorted((SAMPLE / label).iterdir())[:40]:
            shutil.copy(path, source / label / path.name)
    for name, data in BROKEN.items():
        (source / name).write_bytes(data)
    return source


def convert(*argv) -> subprocess.CompletedProcess:
    return run_pipeline(argv, cwd=REPO)


def said(run: subprocess.CompletedProcess) -> str:
    return run.stdout + run.stderr


def shows_first_errors(folder: pathlib.Path, text: str) -> None:
    """`text` shows the first errors of the report in `folder` as `[stage] source: reason`."""
    letters = read_dead_letters(folder)
    shown = [f"[{d['stage']}] {d['source']}: {d['reason']}" for d in letters[:FIRST_ERRORS_SHOWN]]
    assert len(shown) == min(len(BROKEN), FIRST_ERRORS_SHOWN)
    assert all(line in text for line in shown), text
    assert f"first errors ({len(shown)} of {len(letters)})" in text, text


def test_a_rejection_says_each_reason_once_the_first_errors_where_the_report_is_and_what_passes(tmp_path):
    source, out = broken_folder(tmp_path), tmp_path / "ds"
    rejected = convert("--input", source, "--output", out, "--max_error_fraction", "0.001")
    assert rejected.returncode == 1, rejected.stderr[-3000:]
    manifest = load_rejected(out)
    [reason] = manifest.rejected
    assert said(rejected).count(reason) == 1, said(rejected)
    assert "Traceback" not in said(rejected)
    shows_first_errors(out, rejected.stdout)
    for path in (out / manifest.error_files[0], out / "manifest.rejected.json"):
        assert path.exists() and str(path) in rejected.stdout, rejected.stdout
    assert f"python -m pipeline inspect {out}" in rejected.stdout

    suggested = passing_budget(manifest.error_fraction)
    assert f"--max_error_fraction {suggested} would have let them pass" in reason
    assert Decimal(suggested) < Decimal("0.1")  # 7 of about 127: a few percent, not "anything goes"
    passed = convert("--input", source, "--output", out, "--max_error_fraction", suggested)
    assert passed.returncode == 0, passed.stderr[-3000:]
    assert load_manifest(out).counts.errors == len(BROKEN)
    # A run that passes with errors shows them too, and where the report is.
    shows_first_errors(out, passed.stdout)
    assert str(out / load_manifest(out).error_files[0]) in passed.stdout
    assert f"python -m pipeline inspect {out}" in passed.stdout


def test_a_rejection_beside_a_committed_dataset_names_the_files_where_they_are(tmp_path):
    """Over a committed dataset the rejected run's report stays in the run's own folder: the paths
    the rejection names are the ones that exist, and inspect reads them there."""
    source, out = broken_folder(tmp_path), tmp_path / "ds"
    assert convert("--input", source, "--output", out, "--max_error_fraction", "0.5").returncode == 0
    committed = (out / "manifest.json").read_text()
    rejected = convert("--input", source, "--output", out, "--max_error_fraction", "0.001", "--overwrite")
    assert rejected.returncode == 1, rejected.stderr[-3000:]
    assert (out / "manifest.json").read_text() == committed, "the committed dataset stays"
    [staging] = [p for p in out.iterdir() if p.name.startswith(".staging-")]
    shows_first_errors(staging, rejected.stdout)
    assert f"{staging / 'manifest.rejected.json'}" in rejected.stdout
    assert f"python -m pipeline inspect {staging}" in rejected.stdout
    shown = convert("inspect", staging)
    assert shown.returncode == 1 and shown.stdout.startswith(f"REJECTED: {staging} "), shown.stdout


def test_the_first_errors_are_read_from_gcs_and_no_further_than_shown(gcs_emulator, gcs_bucket):
    """The report of a Dataflow run is on gs://; a report that cannot be read says so instead of
    failing the command."""
    dest = f"gs://{gcs_bucket}/ds"
    letters = [{"source": f"gs://{gcs_bucket}/in/{i}.jpg", "stage": "decode", "reason": f"bad {i}"} for i in range(3)]
    gcs_emulator.upload_bytes(
        f"{dest}/errors-00000-of-00002.jsonl", "".join(json.dumps(d) + "\n" for d in letters).encode()
    )
    gcs_emulator.upload_bytes(
        f"{dest}/errors-00001-of-00002.jsonl", b'{"source": "x", "stage": "read", "reason": "y"}\n' * 50
    )
    manifest = manifest_of(53, 1000, 0.01, error_files=("errors-00000-of-00002.jsonl", "errors-00001-of-00002.jsonl"))
    shown = [*letters, *[{"source": "x", "stage": "read", "reason": "y"}] * 2]
    assert first_errors(dest, manifest) == (shown, 5)
    missing = manifest_of(1, 10, 0.01, error_files=("errors-00009-of-00010.jsonl",))
    [letter], _ = first_errors(dest, missing)
    assert letter["source"] == "errors-00009-of-00010.jsonl" and letter["reason"].startswith("cannot read the report")


def test_a_rejected_refresh_names_its_version_folder(tmp_path):
    """`inspect ROOT` would follow LATEST to the previous version: the report names the rejected
    version's own folder."""
    source, root = broken_folder(tmp_path), tmp_path / "root"
    rejected = convert("refresh", "--input", source, "--output", root, "--max_error_fraction", "0.001")
    assert rejected.returncode == 1, rejected.stderr[-3000:]
    [version] = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    [reason] = load_rejected(version).rejected
    assert said(rejected).count(reason) == 1, said(rejected)
    shows_first_errors(version, rejected.stdout)
    assert f"python -m pipeline inspect {version}" in rejected.stdout


def tables(folder: pathlib.Path, other_header: str, bad_rows: int = 0) -> pathlib.Path:
    """a.csv (the dataset's header, 20 rows, and `bad_rows` rows of a field too many) and b.csv (20
    rows under `other_header`)."""
    folder.mkdir()
    rows = [f"{i},1.5,2.5,{i % 2}" for i in range(20)] + [f"{i},1,2,0,9" for i in range(bad_rows)]
    (folder / "a.csv").write_text("\n".join(["id,x1,x2,label", *rows]) + "\n")
    width = len(other_header.split(","))
    (folder / "b.csv").write_text("\n".join([other_header, *([",".join(["7"] * width)] * 20)]) + "\n")
    return folder


def test_a_header_difference_is_named_once_per_file_with_its_columns_and_no_budget(tmp_path):
    """Each row of b.csv is a dead letter (the accounting counts rows), but the terminal names the
    file once, with the columns that differ, and the fix: not a --max_error_fraction that would
    drop half the data."""
    source, out = tables(tmp_path / "in", "id,x2,x1,label,extra"), tmp_path / "ds"
    rejected = convert("--kind", "csv", "--input", source / "*.csv", "--output", out)
    assert rejected.returncode == 1, rejected.stderr[-3000:]
    [reason] = load_rejected(out).rejected
    assert reason == (
        "20 of 40 sources failed (50.00%), over the error budget of 1.00% (--max_error_fraction 0.01): 20 of them "
        "for their CSV file's header, which differs from the dataset's or cannot be read (the errors name each file, "
        "and how): give those files the dataset's header, or leave them out of --input; a larger "
        "--max_error_fraction would only drop their rows"
    )
    line = (
        f"    [header] {source / 'b.csv'}: the file's header differs from the dataset's: it adds ['extra']; it holds "
        "in another place ['x2']; so each of its 20 row(s) is a dead letter: give it the dataset's header, or leave "
        "it out of --input"
    )
    for shown in (rejected.stdout, convert("inspect", out).stdout):
        assert line in shown.splitlines() and shown.count(str(source / "b.csv")) == 1, shown
        assert "first errors (20 of 20):" in shown, shown
    letters = read_dead_letters(out)
    assert sorted(d["source"] for d in letters) == sorted(f"{source / 'b.csv'}:{n}" for n in range(2, 22))
    assert {d["reason"] for d in letters} == {line.split(": ", 1)[1]}
    c = load_rejected(out).counts
    assert (c.listed, c.written, c.skipped, c.errors) == (40, 20, 0, 20)


def test_errors_one_by_one_beside_a_header_difference_get_the_budget_they_need_once_it_is_fixed(tmp_path):
    source, out = tables(tmp_path / "in", "id,x1,label", bad_rows=2), tmp_path / "ds"
    rejected = convert("--kind", "csv", "--input", source / "*.csv", "--output", out)
    assert rejected.returncode == 1, rejected.stderr[-3000:]
    [reason] = load_rejected(out).rejected
    assert "20 of them for their CSV file's header" in reason
    assert reason.endswith(
        "; the other 2 failed one by one: once the headers match, --max_error_fraction 0.048 would let them pass"
    )
    assert (
        f"[header] {source / 'b.csv'}: the file's header differs from the dataset's: it lacks ['x2']; so"
        in rejected.stdout
    )
    (source / "b.csv").write_text("id,x1,x2,label\n" + "7,7,7,7\n" * 20)
    passed = convert("--kind", "csv", "--input", source / "*.csv", "--output", out, "--max_error_fraction", "0.048")
    assert passed.returncode == 0, passed.stderr[-3000:]
    assert load_manifest(out).counts.errors == 2
