"""A quote left open in a CSV swallows no rows: the record it opens is a `parse` dead letter naming
the file and the line where the quote opened, and reading resumes on the next line
(transforms.csv_records.CsvRecords, the one reader of CSV text). Generated CSVs with quotes left
open at random rows, read by CsvRecords, whole and in parts, and converted by the command (tabular
and image CSVs, DirectRunner): every row is a record or a dead letter, and the counts add up."""

from __future__ import annotations

import io
import pathlib
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from tests import broken_images
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline
from transforms.csv_records import CSV_ROW_LINES, CsvRecords, QuoteLeftOpen, unreadable_row

words = st.text("abcdefghij", min_size=1, max_size=6)
# A quoted field: it starts with a letter (a quote left open before it takes its opening quote for
# the close, and the letter after it for text after a close), holds delimiters, line ends and
# quotes written twice.
quoted = st.builds(
    lambda first, rest: '"' + first + rest + '"',
    words,
    st.lists(st.sampled_from([",", "\n", '""', "x", " y"]), max_size=4).map("".join),
)


@st.composite
def tables(draw, good_row) -> tuple[str, list[tuple[str, int, list[str] | None]]]:
    """(the CSV text after a header line, its rows as (kind, first line, fields)): rows of
    `good_row`, and rows whose quote is left open (`7,"text` to the line end) at random places."""
    rows, text, line = [], [], 2
    for bad in draw(st.lists(st.booleans(), min_size=1, max_size=12)):
        if bad:
            row = f'{draw(st.integers(0, 99))},"{draw(words)}{draw(st.sampled_from(["", " more", ", and more"]))}'
            rows.append(("bad", line, None))
        else:
            fields = draw(good_row)
            row = ",".join(fields)
            rows.append(("good", line, [f[1:-1].replace('""', '"') if f.startswith('"') else f for f in fields]))
        text.append(row)
        line += row.count("\n") + 1
    end = draw(st.sampled_from(["\n", ""]))
    return "\n".join(text) + end, rows


TABULAR_ROW = st.tuples(st.integers(0, 999).map(str), st.one_of(words, quoted), st.integers(0, 9).map(str)).map(list)


def expected(rows) -> list[tuple[int, list[str] | str]]:
    """What CsvRecords gives for `rows`: a good one's fields at its last line, a bad one's error at
    its first."""
    found = []
    for kind, line, fields in rows:
        if kind == "good":
            found.append((line + sum(f.count("\n") for f in fields), fields))
        else:
            found.append((line, "QuoteLeftOpen"))
    return found


def read(text: str, **part) -> list[tuple[int, list[str] | str]]:
    return [
        (line, type(row).__name__ if isinstance(row, Exception) else row)
        for line, row in CsvRecords(io.StringIO(text, newline=""), **part)
    ]


@settings(max_examples=300, deadline=None)
@given(tables(TABULAR_ROW), st.data())
def test_every_row_is_a_row_or_a_dead_letter_at_the_line_its_quote_opened(table, data):
    text, rows = table
    whole = read("a,b,c\n" + text)
    assert whole[1:] == expected(rows)
    # Cut where a reader of the whole text may start a part, each part reads as the whole does.
    starts, records = [], CsvRecords(io.StringIO("a,b,c\n" + text, newline=""))
    for _ in records:
        if records.part_may_start:
            starts.append((records.offset, records.line))
    cuts = sorted(set(data.draw(st.lists(st.sampled_from(starts), max_size=4)))) if starts else []
    bounds = [(0, 0), *cuts]
    parts = []
    for (start, line), end in zip(bounds, [offset for offset, _ in cuts] + [None], strict=True):
        stream = io.StringIO(("a,b,c\n" + text)[start:], newline="")  # ASCII: characters are bytes
        parts += read_part(stream, start, line, end)
    assert parts == whole


def read_part(stream, start, line, end):
    return [
        (at, type(row).__name__ if isinstance(row, Exception) else row)
        for at, row in CsvRecords(stream, start=start, line=line, end=end)
    ]


def test_a_dead_letter_says_where_the_quote_opened_and_that_the_rows_after_it_are_read():
    [_, _, (line, error), *rest] = CsvRecords(io.StringIO('a,b\n1,x\n2,"open\n3,y\n4,z\n', newline=""))
    assert line == 3 and isinstance(error, QuoteLeftOpen)
    assert unreadable_row(error) == (
        "a quote left open: the quoted field that opens on this line runs to the end of the file; the lines "
        "after this one are read again, as rows of their own"
    )
    assert rest == [(4, ["3", "y"]), (5, ["4", "z"])]
    [_, _, (line, error), (_, row)] = CsvRecords(io.StringIO('a,b\n1,x\n2,"open\n3,"y"\n', newline=""))
    assert line == 3 and "malformed CSV on line 4" in unreadable_row(error) and row == ["3", "y"]


def test_a_quote_that_a_later_line_closes_is_a_dead_letter_past_the_lines_a_row_may_span():
    """A quote left open that a later quote closes before a delimiter (`",`) makes one row of the
    lines between: as a quoted field that holds line ends does, up to CSV_ROW_LINES lines."""
    within = 'a,b\n1,"open\n' + "x\n" * 10 + '",2\n3,y\n'
    assert [row for _, row in CsvRecords(io.StringIO(within, newline=""))][1:] == [
        ["1", "open\n" + "x\n" * 10, "2"],
        ["3", "y"],
    ]
    past = 'a,b\n1,"open\n' + "x\n" * CSV_ROW_LINES + '",2\n3,y\n'
    records = list(CsvRecords(io.StringIO(past, newline="")))
    assert records[1][0] == 2 and isinstance(records[1][1], QuoteLeftOpen)
    assert f"spans more than {CSV_ROW_LINES:,} lines" in unreadable_row(records[1][1])
    assert [row for _, row in records[2:5]] == [["x"]] * 3
    assert records[-1] == (CSV_ROW_LINES + 4, ["3", "y"]) and len(records) == CSV_ROW_LINES + 4


# --- the command: tabular and image CSVs, every row a record or a dead letter


def check_run(out: pathlib.Path, csv_path: pathlib.Path, rows) -> None:
    manifest = load_manifest(out)
    good = [r for r in rows if r[0] == "good"]
    bad = [r for r in rows if r[0] == "bad"]
    assert manifest.counts.written == len(good) and manifest.counts.errors == len(bad)
    assert manifest.counts.listed == manifest.counts.written + manifest.counts.skipped + manifest.counts.errors
    assert manifest.errors_by_stage == ({"parse": len(bad)} if bad else {})
    letters = read_dead_letters(out)
    assert sorted(letter["source"] for letter in letters) == sorted(f"{csv_path}:{line}" for _, line, _ in bad)
    assert all(letter["reason"].startswith(("a quote left open", "malformed CSV on line")) for letter in letters)


@settings(max_examples=6, deadline=None)
@given(tables(TABULAR_ROW))
def test_a_tabular_conversion_makes_every_row_a_record_or_a_dead_letter(table):
    text, rows = table
    if not any(kind == "good" for kind, _, _ in rows):
        rows, text = (
            [*rows, ("good", text.count("\n") + 2 + (not text.endswith("\n")), ["1", "a", "2"])],
            (text + ("" if text.endswith("\n") else "\n") + "1,a,2\n"),
        )
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = pathlib.Path(tmp) / "table.csv"
        csv_path.write_text("id,name,value\n" + text)
        out = pathlib.Path(tmp) / "out"
        argv = ["--kind", "csv", "--input", str(csv_path), "--output", str(out), "--max_error_fraction", "1"]
        assert main(argv) == 0
        check_run(out, csv_path, rows)
        names = sorted(r["name"].decode() for split in load_manifest(out).splits for r in read_split(out, split))
        assert names == sorted(fields[1] for kind, _, fields in rows if kind == "good")


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("images")
    for i in range(12):
        (folder / f"{i}.png").write_bytes(broken_images.image_bytes("PNG", "RGB", size=(4 + i, 5)))
    return folder


@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_an_image_csv_conversion_makes_every_row_a_record_or_a_dead_letter(images, data):
    numbers = iter(range(12))  # an image each: no duplicates
    labels = st.one_of(words, words.map(lambda word: f'"{word}, {word}"'))  # a label holding a delimiter
    image_row = st.builds(lambda label: [f"{images}/{next(numbers)}.png", label], labels)
    text, rows = data.draw(tables(image_row))
    if not any(kind == "good" for kind, _, _ in rows):
        return
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = pathlib.Path(tmp) / "labels.csv"
        csv_path.write_text("image_uri,label\n" + text)
        out = pathlib.Path(tmp) / "out"
        argv = ["--kind", "image_csv", "--input", str(csv_path), "--output", str(out), "--image_roots", str(images)]
        argv += ["--max_error_fraction", "1"]
        assert main(argv) == 0
        check_run(out, csv_path, rows)


def test_the_command_reports_a_quote_left_open_and_writes_the_rows_after_it(tmp_path):
    csv_path = tmp_path / "table.csv"
    csv_path.write_text('id,name,value\n1,a,2\n4,"d\ne",5\n2,"b,3\n3,c,4\n')
    out = tmp_path / "out"
    result = run_pipeline(["--kind", "csv", "--input", csv_path, "--output", out, "--max_error_fraction", "0.5"])
    assert result.returncode == 0, result.stderr
    check_run(out, csv_path, [("good", 2, None), ("good", 3, None), ("bad", 5, None), ("good", 6, None)])
    assert read_dead_letters(out) == [
        {
            "source": f"{csv_path}:5",
            "stage": "parse",
            "reason": "a quote left open: the quoted field that opens on this line runs to the end of the file; the "
            "lines after this one are read again, as rows of their own",
        }
    ]


def test_a_first_line_with_a_quote_left_open_is_refused_unless_it_is_data(tmp_path):
    """A header names the columns, so a first line that is no row stops the run in one line (with
    csv.header auto, it may be the header); declared data (csv.header: false), it is a dead letter."""
    csv_path = tmp_path / "table.csv"
    csv_path.write_text('id,"name,value\n1,a,2\n3,b,4\n')
    result = run_pipeline(["--kind", "csv", "--input", csv_path, "--output", tmp_path / "out"])
    assert result.returncode == 2, result.stderr
    assert the_one_line(result.stderr).endswith(
        f"{csv_path}: cannot read its header, which names the dataset's columns: its first line is no row: a quote "
        "left open: the quoted field that opens on this line runs to the end of the file (fix its quotes, or set "
        "csv.header: false if that line is data)"
    )
    (tmp_path / "data.yaml").write_text("csv:\n  header: false\n")
    argv = ["--config", str(tmp_path / "data.yaml"), "--kind", "csv", "--input", str(csv_path)]
    assert main([*argv, "--output", str(tmp_path / "out"), "--max_error_fraction", "0.5"]) == 0
    check_run(tmp_path / "out", csv_path, [("bad", 1, None), ("good", 2, None), ("good", 3, None)])
