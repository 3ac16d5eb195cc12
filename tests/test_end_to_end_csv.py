"""End to end on the DirectRunner: tabular CSV files (plain and .gz) -> one Example per row, every
row checked against its source, malformed rows and files in the dead letters."""

from __future__ import annotations

import csv
import gzip
import io
import os
import pathlib
import shutil

import pytest

from core.contract.folders import dataset_folder
from core.storage import children, text_reader
from pipeline.cli import main
from pipeline.report import dataset_summary
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from tests.subprocess_limits import run_pipeline
from transforms.splits import assign_split

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample" / "tabular"
FRACTIONS = (("train", 0.8), ("validation", 0.2))


def source_rows(folder: pathlib.Path):
    """{id: (key, row dict)} over every CSV file, read independently of the pipeline."""
    rows = {}
    for path in sorted(folder.iterdir()):
        if not path.name.startswith("part-"):
            continue
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for row in reader:
            rows[row["id"]] = (f"{path.name}:{reader.line_num}", row)
    return rows


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The sample tables plus a file with another header and a file with malformed rows."""
    root = tmp_path_factory.mktemp("tables")
    for path in SAMPLE.iterdir():
        shutil.copy(path, root / path.name)
    header = (SAMPLE / "part-000.csv").read_text().splitlines()[0]
    (root / "zz-other-header.csv").write_text("a,b\n1,2\n\n3,4\n")
    width = len(header.split(","))
    good = ",".join(["90001", "1.5", "2.5", "3.5", "4", "blue", "true", "1"][:width])
    (root / "z-bad-rows.csv").write_bytes(
        "\n".join(
            [
                header,
                good,  # fine
                "90002,1",  # too few fields
                good.replace("90001", "90003").replace("blue", "bl\xffue"),  # invalid UTF-8 (raw byte below)
                good.replace("90001", "90004").replace("true", "maybe"),  # not a declared bool
            ]
        ).encode("latin-1")
        + b"\n"
    )
    return root


@pytest.fixture(scope="module")
def converted(tables, tmp_path_factory):
    config = tmp_path_factory.mktemp("cfg") / "csv.yaml"
    config.write_text("kind: csv\ncsv:\n  schema: {flag: bool}\n")
    out = tmp_path_factory.mktemp("out") / "ds"
    assert (
        main(
            [
                "--config",
                str(config),
                "--input",
                str(tables / "*.csv*"),
                "--output",
                str(out),
                "--max_error_fraction",
                "0.5",
            ]
        )
        == 0
    )
    return out


def test_feature_spec_is_inferred_over_all_data(converted):
    features = load_manifest(converted).features
    assert {n: f.dtype for n, f in features.items()} == {
        "id": "int64",
        "x1": "float32",
        "x2": "float32",
        "x3": "float32",
        "count": "int64",
        "category": "string",
        "flag": "int64",
        "label": "int64",
    }
    assert features["id"].required and features["label"].required
    assert not features["x1"].required  # the sample has empty cells there


def test_every_row_is_a_record_or_a_dead_letter(tables, converted):
    expected = source_rows(SAMPLE)
    manifest = load_manifest(converted)
    seen = {}
    for split in manifest.splits:
        for record in read_split(converted, split):
            seen[str(record["id"])] = (split, record)
    assert set(seen) == set(expected) | {"90001"}
    for row_id, (key, row) in expected.items():
        split, record = seen[row_id]
        assert split == assign_split(key, FRACTIONS)
        for column, value in row.items():
            got = record[column]
            if value == "":
                assert got is None, f"{row_id}.{column}: empty cell must be absent"
            elif column == "flag":
                assert got == {"true": 1, "false": 0}[value.lower()]
            elif column in ("x1", "x2", "x3"):
                assert got == pytest.approx(float(value), rel=1e-6)
            elif column == "category":
                assert got.decode() == value
            else:
                assert got == int(value)

    letters = read_dead_letters(converted)
    reasons = {pathlib.Path(d["source"]).name: (d["stage"], d["reason"]) for d in letters}
    # Each row of a file with another header weighs in the error budget, blank lines not.
    assert reasons["zz-other-header.csv:2"][0] == reasons["zz-other-header.csv:4"][0] == "header"
    assert "expected 8 fields, found 2" in reasons["z-bad-rows.csv:3"][1]
    assert reasons["z-bad-rows.csv:4"][1] == "invalid UTF-8"
    assert "'maybe' is not true/false" in reasons["z-bad-rows.csv:5"][1]
    counts = manifest.counts
    assert (counts.written, counts.errors, counts.skipped) == (len(expected) + 1, 5, 0)
    assert counts.reconciles()


def test_fifos_and_device_links_among_the_csvs_are_dead_letters_not_hangs(tmp_path):
    """A FIFO matching the pattern would block its read until some writer opened it, and a link to
    /dev/zero would read until memory ran out. The FIFO sorts first, where the planner takes the
    dataset's header from. Each is one `read` dead letter, every row of the other files is written,
    and the run ends. Run as a process with a time limit, so a hang fails the test, not the suite."""
    tables, out = tmp_path / "tables", tmp_path / "ds"
    shutil.copytree(SAMPLE, tables)
    os.mkfifo(tables / "a-pipe.csv")
    os.symlink("/dev/zero", tables / "zero.csv")
    argv = ["--kind", "csv", "--input", tables / "*.csv*", "--output", out, "--max_error_fraction", "0.5"]
    result = run_pipeline(argv)
    assert result.returncode == 0, result.stderr[-3000:]
    letters = {pathlib.Path(d["source"]).name: (d["stage"], d["reason"]) for d in read_dead_letters(out)}
    assert letters == {
        "a-pipe.csv": ("read", "not a regular file: a FIFO"),
        "zero.csv": ("read", "not a regular file: a link to /dev/zero, a character device"),
    }
    _assert_every_sample_row_and_two_errors(out, "read")


def _assert_every_sample_row_and_two_errors(dataset, stage: str) -> None:
    """Every row of the sample tables written, and the two bad files counted as listed errors."""
    expected = source_rows(SAMPLE)
    manifest = load_manifest(dataset)
    written = sorted(str(r["id"]) for split in manifest.splits for r in read_split(dataset, split))
    assert written == sorted(expected)
    counts = manifest.counts
    assert (counts.listed, counts.written, counts.skipped, counts.errors) == (len(expected) + 2, len(expected), 0, 2)
    assert manifest.errors_by_stage == {stage: 2}


@pytest.mark.parametrize("command", ["convert", "refresh"])
def test_a_dangling_link_among_the_csvs_is_a_list_dead_letter_not_left_out(tmp_path, command):
    """Beam's local matching cannot read a dangling link's size and drops it without a word; like a
    dangling link in a class folder, it is one `list` dead letter naming where it points, counted
    as listed. One sorts first, where the planner takes the dataset's header from."""
    tables, out = tmp_path / "tables", tmp_path / "ds"
    shutil.copytree(SAMPLE, tables)
    os.symlink("missing.csv", tables / "gone.csv")  # relative, as `ln -s missing.csv gone.csv` makes
    os.symlink(tmp_path / "elsewhere.csv.gz", tables / "a-first.csv.gz")
    argv = [command, "--kind", "csv", "--input", tables / "*.csv*", "--output", out, "--max_error_fraction", "0.5"]
    result = run_pipeline(argv)
    assert result.returncode == 0, result.stderr[-3000:]
    dataset = dataset_folder(str(out), text_reader(str(out)), children)
    assert sorted(read_dead_letters(dataset), key=lambda d: d["source"]) == [
        {
            "source": str(tables / "a-first.csv.gz"),
            "stage": "list",
            "reason": f"a link to {tmp_path / 'elsewhere.csv.gz'}, which does not exist (dangling link)",
        },
        {
            "source": str(tables / "gone.csv"),
            "stage": "list",
            "reason": f"a link to {tables / 'missing.csv'}, which does not exist (dangling link)",
        },
    ]
    _assert_every_sample_row_and_two_errors(dataset, "list")


def test_a_refresh_after_a_link_dangles_is_a_new_version_that_reports_it(tmp_path):
    """The link is part of the input even though it holds no rows: a refresh that called the input
    unchanged would never report it."""
    tables, root = tmp_path / "tables", tmp_path / "versions"
    shutil.copytree(SAMPLE, tables)
    argv = ["refresh", "--kind", "csv", "--input", tables / "*.csv*", "--output", root, "--max_error_fraction", "0.5"]

    def refresh() -> str:
        result = run_pipeline(argv)
        assert result.returncode == 0, result.stderr[-3000:]
        return dataset_folder(str(root), text_reader(str(root)), children)

    first = refresh()
    os.symlink("missing.csv", tables / "gone.csv")
    second = refresh()
    assert second != first, "a new version"
    assert [(d["source"], d["stage"]) for d in read_dead_letters(second)] == [(str(tables / "gone.csv"), "list")]
    assert load_manifest(second).counts.listed == load_manifest(first).counts.listed + 1


def test_a_column_of_numbers_that_one_value_made_string_is_a_warning_in_the_manifest_and_summary(tmp_path, capsys):
    """One stray value ("n/a") turns a column of numbers into strings for the trainer: the run
    says so where every user looks (the summary, `inspect`, the manifest), naming the value."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("x,y\n" + "".join(f"{i},{i}.5\n" for i in range(20)))
    (tmp_path / "in" / "b.csv").write_text("x,y\n1,n/a\n2,3.5\n")
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    assert manifest.features["y"].dtype == "string" and manifest.features["x"].dtype == "int64"
    [warning] = manifest.warnings
    assert warning.startswith("column 'y' is stored as strings: 1 of its 22 values is not a number")
    assert f"{tmp_path / 'in' / 'b.csv'}:2: 'n/a'" in warning
    assert f"  warning: {warning}" in capsys.readouterr().out.splitlines()
    assert f"  warning: {warning}" in dataset_summary(str(out), manifest)


def test_numbers_that_lose_digits_are_warnings_and_grouped_digits_stay_text(tmp_path, capsys):
    """Zip codes stored as int64 lose their leading zeros, timestamps stored as float32 their
    last digits: the run says so and names one value of each. "2023_01" is a code, not the
    number 202301 (Python's float() would read it so)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(
        "zip,period,ts\n02134,2023_01,1700000037.5\n90210,2023_02,0.5\n00501,2024_11,1700000100\n"
    )
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    assert [manifest.features[c].dtype for c in ("zip", "period", "ts")] == ["int64", "string", "float32"]
    zeros, rounded = manifest.warnings
    assert zeros.startswith("column 'zip' is stored as int64, which keeps no leading zeros: 2 of its 3 values")
    assert f"{tmp_path / 'in' / 'a.csv'}:2: '02134' is stored as 2134" in zeros
    assert rounded.startswith("column 'ts' is stored as float32, which holds numbers of 16,777,216 or more only")
    assert f"{tmp_path / 'in' / 'a.csv'}:2: '1700000037.5' is stored as 1700000000.0" in rounded
    said = capsys.readouterr().out.splitlines()
    assert f"  warning: {zeros}" in said and f"  warning: {rounded}" in said
    written = sorted((r["period"], r["zip"], r["ts"]) for split in manifest.splits for r in read_split(out, split))
    assert written == [(b"2023_01", 2134, 1700000000.0), (b"2023_02", 90210, 0.5), (b"2024_11", 501, 1700000128.0)]


def test_hidden_matches_are_skipped_not_read(tmp_path):
    """`**/*.csv` matches Jupyter's checkpoint copies (every row again) and `*.csv` macOS's `._`
    resource forks (binary, and sorting first, where the planner takes the header from): as in a
    shell, a wildcard matches no hidden name, and each such file is skipped as (hidden)."""
    tables, out = tmp_path / "tables", tmp_path / "ds"
    shutil.copytree(SAMPLE, tables / "part")
    (tables / ".ipynb_checkpoints").mkdir()
    shutil.copy(tables / "part" / "part-000.csv", tables / ".ipynb_checkpoints" / "part-000-checkpoint.csv")
    (tables / "part" / "._part-000.csv").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    assert main(["--kind", "csv", "--input", str(tables / "**" / "*.csv*"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    written = sorted(str(r["id"]) for split in manifest.splits for r in read_split(out, split))
    assert written == sorted(source_rows(SAMPLE))
    assert (manifest.counts.skipped, manifest.counts.errors) == (2, 0)
    assert manifest.skipped_by_extension == {"(hidden)": 2}


def test_a_row_with_a_long_text_is_written_whole(tmp_path):
    """Python's csv module refuses fields of more than 131,072 characters, which long documents
    pass: such a row was a `parse` dead letter ("field larger than field limit")."""
    (tmp_path / "in").mkdir()
    article = "word " * 60_000  # 300,000 characters
    with open(tmp_path / "in" / "docs.csv", "w", newline="") as f:
        csv.writer(f).writerows([("id", "text"), (1, "short"), (2, article), (3, "short too")])
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    assert (manifest.counts.written, manifest.counts.errors) == (3, 0)
    texts = {r["id"]: r["text"] for split in manifest.splits for r in read_split(out, split)}
    assert texts == {1: b"short", 2: article.encode(), 3: b"short too"}


def test_a_byte_that_is_not_utf8_near_the_header_costs_its_row_not_the_run(tmp_path, caplog):
    """The header was decoded with the text read along with it, so a Latin-1 byte in an early row
    refused the whole run as an unreadable header; in a later row it was that row's dead letter."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.csv").write_bytes(b"id,name\n1,caf\xe9\n" + b"".join(b"%d,ok\n" % i for i in range(2, 200)))
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    assert (manifest.counts.written, manifest.counts.errors) == (198, 1)
    [letter] = read_dead_letters(out)
    assert (letter["source"], letter["stage"], letter["reason"]) == (f"{tmp_path}/in/t.csv:2", "parse", "invalid UTF-8")
    (tmp_path / "in" / "t.csv").write_bytes(b"id,caf\xe9\n1,a\n")  # the header itself: refused, naming it
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(tmp_path / "o2")]) == 2
    assert (
        "t.csv: cannot read its header, which names the dataset's columns: it is not UTF-8 CSV text: it begins as "
        "text in another encoding than UTF-8 (Latin-1 or Windows-1252? save it as UTF-8)"
    ) in caplog.text
    assert "caf" not in caplog.text.split("cannot read its header")[1]  # described, never quoted


def test_a_spreadsheet_export_pads_rows_without_adding_records_or_columns(tmp_path):
    """Spreadsheets export trailing empty fields, and rows of nothing but commas below the data:
    those rows became records with no features (every value a reader's default), and a padded
    header a column named ""."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "sheet.csv").write_text("id,name,,\n1,ann,,\n2,bob\n3,cy,,late\n4,,,,\n,,,\n , ,,\n,,,\n")
    out = tmp_path / "out"
    argv = [
        "--kind",
        "csv",
        "--input",
        str(tmp_path / "in" / "*.csv"),
        "--output",
        str(out),
        "--max_error_fraction",
        "0.5",
    ]
    assert main(argv) == 0
    manifest = load_manifest(out)
    assert sorted(manifest.features) == ["id", "name"]
    assert (manifest.counts.listed, manifest.counts.written, manifest.counts.errors) == (4, 3, 1)
    records = sorted((r["id"], r.get("name")) for split in manifest.splits for r in read_split(out, split))
    assert records == [(1, b"ann"), (2, b"bob"), (4, None)]  # 4: its name empty, then padding
    [letter] = read_dead_letters(out)
    assert (letter["source"].endswith("sheet.csv:4"), letter["reason"]) == (True, "expected 2 fields, found 4")


def test_a_csv_written_with_comma_space_keeps_its_numbers_and_says_what_keeps_spaces(tmp_path):
    """`id, n, name`: the integers of ` n` were float32 (float() takes spaces, the int64 check did
    not), and nothing said that the keys and the text keep their spaces."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.csv").write_text("id, n, name\n1, 2, ann\n3, 40, bob\n")
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    assert {name: spec.dtype for name, spec in manifest.features.items()} == {
        "id": "int64",
        " n": "int64",
        " name": "string",
    }
    assert [w.split(" have spaces")[0] for w in manifest.warnings] == ["columns [' n', ' name']"]
    records = sorted((r["id"], r[" n"], r[" name"]) for split in manifest.splits for r in read_split(out, split))
    assert records == [(1, 2, b" ann"), (3, 40, b" bob")]
