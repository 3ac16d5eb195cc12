"""CSV dialects are never silently wrong: a `;`- or tab-separated file (Excel in most of Europe)
became one string feature named `id;x;name` at exit 0. The delimiter is chosen from the header and
first rows of the first file (or given: csv.delimiter), once, and every worker reads with it;
where it cannot be told, or a given one splits the rows otherwise than the header, the run is
refused naming the likely one. Numbers may be written with a decimal comma (csv.decimal)."""

from __future__ import annotations

import csv
import io
import os
import pathlib
import pickle
import re
import tempfile

import pytest
from apache_beam.io.filesystem import FileMetadata
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.config import ConfigError, load_config
from tests.dataset_reader import load_manifest, read_split
from transforms.csv_dialect import CANDIDATES, CsvDialect, DialectError, choose_delimiter
from transforms.tabular import (
    InferSchema,
    ReadCsvRows,
    Row,
    column_warnings,
    is_float,
    parse_value,
    read_float,
    read_header,
)

FRACTIONS = (("train", 0.8), ("validation", 0.2))
# Names as headers usually have them: no delimiter of any kind in them.
NAMES = st.lists(
    st.text("abcdefghijklmnopqrstuvwxyz_0123456789 ", min_size=1, max_size=8).filter(str.strip),
    min_size=1,
    max_size=6,
    unique=True,
)
# Values: anything a cell holds, every candidate delimiter, quotes and line ends included.
CELL = st.text(',;\t|"\r\n .-0123456789abcäé€', max_size=10)


def _data(row: list[str]) -> bool:
    """Whether a row holds data that every reading of it tells apart: something besides spaces,
    and in a one-column table no candidate delimiter at its end (`0,` is also `0` padded by a
    spreadsheet: a one-column file is read with the first delimiter that splits no row, padding
    aside)."""
    if len(row) == 1 and row[0].rstrip(" \r\n").endswith(tuple(CANDIDATES)):
        return False
    return any(c.strip() for c in row)


@st.composite
def tables(draw):
    """A header and rows of cells (each row with data in it, as blank rows are no rows)."""
    names = draw(NAMES)
    row = st.lists(CELL, min_size=len(names), max_size=len(names)).filter(_data)
    return names, draw(st.lists(row, min_size=1, max_size=12))


def written(names, rows, delimiter: str, bom: bool = False) -> str:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter).writerows([names, *rows])
    return ("\ufeff" if bom else "") + out.getvalue()


def read_back(path: str, columns: tuple[str, ...], dialect: CsvDialect) -> list:
    """What the job's ReadCsvRows makes of the file: each row's values, or a dead letter."""
    reader = ReadCsvRows(os.path.dirname(path), columns, FRACTIONS, dialect.delimiter, header=dialect.header)
    found = reader.process(FileMetadata(path, 0))
    return [o.values if isinstance(o, Row) else o.value for o in found]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(), delimiter=st.sampled_from(CANDIDATES), bom=st.booleans())
def test_a_table_written_at_any_candidate_reads_back_as_written(table, delimiter, bom):
    """Whatever the cells hold (other delimiters, quotes, line ends), the header and every row come
    back as written, or the run is refused (one column, whose values all hold another delimiter
    alike: a header that lacks names?): the planner's choice (read_header) and the job's reading
    (ReadCsvRows) agree."""
    names, rows = table
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.csv")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(written(names, rows, delimiter, bom))
        try:
            columns, dialect = pickle.loads(pickle.dumps(read_header(path, header=True)))  # as the plan ships them
        except DialectError as e:  # one column whose every value holds another delimiter alike
            assert len(names) == 1 and "its header names one column" in str(e)
            return
        assert tuple(columns) == tuple(names)
        if len(names) > 1:
            assert dialect.delimiter == delimiter
        assert read_back(path, columns, dialect) == [tuple(row) for row in rows]


@settings(max_examples=100, deadline=None)
@given(table=tables(), delimiter=st.sampled_from(CANDIDATES), given_=st.sampled_from((*CANDIDATES, ":")))
@example(table=(["0", "00"], [["0\r", ""]]), delimiter=",", given_=";")  # at ';' its one row is a quote left open
def test_a_given_delimiter_that_splits_a_table_otherwise_is_refused_naming_the_right_one(table, delimiter, given_):
    names, rows = table
    if len(names) < 2 or given_ == delimiter:
        return
    with pytest.raises(DialectError) as refused:
        choose_delimiter(written(names, rows, delimiter), given_)
    message = str(refused.value)
    assert "\n" not in message and f"csv.delimiter: {delimiter!r}" in message, message


@pytest.mark.parametrize(
    "head, expected",
    [
        ("a,b;c\nx,y;z\n", "split equally well at ',' into 2 and ';' into 2 fields"),  # which one?
        ("a,b;c\n", "split equally well at ',' into 2 and ';' into 2 fields"),  # a header only
        ("id,x,name\n1;2;a\n3;4;b\n", "at ';' its rows have 3 each, its header 1: another file's header?"),
        ("id\n1,2\n3,4\n", "its header names one column, but each of its first 2 row(s) has 2 fields at ','"),
    ],
)
def test_a_delimiter_that_cannot_be_told_is_refused(head, expected):
    with pytest.raises(DialectError, match=expected.replace("?", r"\?").replace("(", r"\(").replace(")", r"\)")):
        choose_delimiter(head)


def test_one_column_is_read_whole_whatever_its_values_hold():
    """A one-column file written at `;` quotes no comma: `Müller, Anna` is one value."""
    assert choose_delimiter("name\nMüller, Anna\nBob\n") == ";"
    assert choose_delimiter("name\nAnna\nBob\n") == ","
    assert choose_delimiter('name\n"a,b"\n"c;d"\n') == ","


@settings(max_examples=200, deadline=None)
@given(number=st.floats(min_value=-1e15, max_value=1e15), places=st.integers(1, 6))
def test_numbers_written_with_a_decimal_comma_are_read_as_those_numbers(number, places):
    pointed = f"{number:.{places}f}"
    comma = pointed.replace(".", ",")
    assert read_float(comma, ",") == float(pointed) == parse_value(comma, "float32", ",")
    assert not is_float(comma, ".") and not is_float(pointed, ",")  # each convention's numbers are text in the other


def test_with_a_decimal_comma_a_point_makes_text():
    """`1.234,5` groups thousands, `1.5` is the other convention: a guess at either could be wrong."""
    assert [v for v in ["1.234,5", "1.5", "1,2,3", "1_000,5", ",", "", "1.5e3"] if is_float(v, ",")] == []


def infer(values, decimal=".", declared=None):
    combine = InferSchema(("x",), declared or {}, decimal)
    acc = combine.create_accumulator()
    for line, value in enumerate(values, 2):
        acc = combine.add_input(acc, Row(f"f.csv:{line}", "train", (value,)))
    return combine.extract_output(combine.merge_accumulators([acc, combine.create_accumulator()]))["x"]


@settings(max_examples=100, deadline=None)
@given(
    numbers=st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=300),
    places=st.integers(1, 4),
)
def test_a_column_of_decimal_commas_is_named_with_the_setting_that_reads_it(numbers, places):
    """With csv.decimal '.', such a column is stored as strings (as it was), with a warning naming
    `csv.decimal: ','`, whatever its length; with ',', it is float32 without one."""
    values = [f"{n:.{places}f}".replace(".", ",") for n in numbers]
    found = infer(values)
    [warning] = column_warnings("x", found)
    assert found.dtype == "string" and "set csv.decimal: ','" in warning and found.stray_text is None
    assert ("thousands" in warning) == all(len(v.split(",")[0].lstrip("-")) <= 3 and places == 3 for v in values)
    assert infer(values, ",").dtype == "float32" and column_warnings("x", infer(values, ",")) == []
    assert column_warnings("x", infer(values, declared={"x": "string"})) == []


def test_a_column_of_decimal_points_where_the_setting_is_a_comma_is_named_too():
    found = infer(["4.5", "12.25", "7"], ",")
    [warning] = column_warnings("x", found)
    assert found.dtype == "string" and "set csv.decimal: '.'" in warning


@pytest.mark.parametrize(
    "value, expected",
    [
        ("tab", "csv.delimiter: should be auto or one character that is not a letter, digit, quote or line end"),
        (";;", "csv.delimiter: should be auto or one character"),
        ('"', "csv.delimiter: should be auto or one character"),
    ],
)
def test_the_delimiter_setting_is_checked(tmp_path, value, expected):
    path = tmp_path / "c.yaml"
    path.write_text(f"csv: {{delimiter: {value!r}}}\n")
    with pytest.raises(ConfigError) as refused:
        load_config(str(path))
    assert expected in str(refused.value) and "\n" not in str(refused.value)
    assert load_config(None, {"csv": {"delimiter": "\t", "decimal": ","}}).csv.delimiter == "\t"
    with pytest.raises(ConfigError, match="csv.decimal: should be 'auto', '.' or ','"):
        load_config(None, {"csv": {"decimal": ";"}})


# --- end to end, through the command


def convert(tmp_path, text: str, *settings_lines: str, name="t.csv") -> tuple[int, pathlib.Path]:
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in" / name).write_text(text, encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text("kind: csv\n" + "".join(f"{line}\n" for line in settings_lines))
    out = tmp_path / "out"
    argv = ["--config", str(config), "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]
    return main(argv), out


def records(out) -> list[dict]:
    return sorted((r for split in load_manifest(out).splits for r in read_split(out, split)), key=lambda r: r["id"])


EXCEL_EU = 'id;price;name\n1;46,70;"Müller; Anna"\n2;3,5;Bob, Jr\n3;-0,25;Cy\n'


def test_a_semicolon_file_becomes_its_columns_and_its_decimal_commas_numbers(tmp_path):
    code, out = convert(tmp_path, EXCEL_EU)
    assert code == 0
    manifest = load_manifest(out)
    assert {n: f.dtype for n, f in manifest.features.items()} == {"id": "int64", "price": "float32", "name": "string"}
    assert manifest.warnings == ()
    assert [r["name"] for r in records(out)] == ["Müller; Anna".encode(), b"Bob, Jr", b"Cy"]
    assert [r["price"] for r in records(out)] == pytest.approx([46.7, 3.5, -0.25])
    assert manifest.inputs["layout"] == {"delimiter": ";", "decimal": ",", "header": True}
    assert manifest.options["planned_delimiter"] == ";", "the manifest records what the run read with"


def test_decimal_commas_read_with_a_point_are_named_in_one_warning(tmp_path):
    code, out = convert(tmp_path, "id;price;cost\n1;46,70;1,5\n2;3,5;2,25\n", 'csv: {decimal: "."}')
    assert code == 0
    manifest = load_manifest(out)
    assert manifest.features["price"].dtype == manifest.features["cost"].dtype == "string"
    [warning] = manifest.warnings
    assert warning.startswith(
        "columns ['price', 'cost'] are stored as strings, though in column 'price', all 2 of its values are numbers "
        "written with ',' before the fraction"
    )
    assert "set csv.decimal: ','" in warning


def test_a_decimal_comma_setting_stores_those_numbers(tmp_path):
    code, out = convert(tmp_path, EXCEL_EU, 'csv: {decimal: ","}')
    assert code == 0
    assert load_manifest(out).features["price"].dtype == "float32" and load_manifest(out).warnings == ()
    assert [r["price"] for r in records(out)] == pytest.approx([46.7, 3.5, -0.25])


@pytest.mark.parametrize("delimiter", ["\t", "|"])
def test_tab_and_pipe_files_become_their_columns(tmp_path, delimiter):
    rows = [("id", "note", "n"), ("1", "a, b; c", "2"), ("2", "x\ty|z", "3")]
    code, out = convert(tmp_path, written(rows[0], rows[1:], delimiter))
    assert code == 0
    assert [(r["id"], r["note"], r["n"]) for r in records(out)] == [(1, b"a, b; c", 2), (2, b"x\ty|z", 3)]


def test_a_one_column_file_is_converted_whole(tmp_path):
    """Exported at `;` (Excel in most of Europe), its values' commas are not quoted."""
    code, out = convert(tmp_path, "id\nMüller, Anna\nBob\n")
    assert code == 0
    assert sorted(r["id"] for r in records(out)) == [b"Bob", "Müller, Anna".encode()]


def refused(caplog, code) -> str:
    assert code == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "\n" not in errors[0], errors
    return errors[0]


def test_a_given_delimiter_that_splits_no_row_as_the_header_is_refused_with_the_likely_one(tmp_path, caplog):
    line = refused(caplog, convert(tmp_path, "id;price\n1;46,70\n2;5,5\n", "csv: {delimiter: ','}")[0])
    assert f"{tmp_path}/in/t.csv: csv.delimiter ',' makes it one column" in line
    assert "set csv.delimiter: ';'" in line
    assert not (tmp_path / "out").exists()


def test_rows_that_split_otherwise_than_the_header_are_refused(tmp_path, caplog):
    line = refused(caplog, convert(tmp_path, "id,x,name\n1;2;a\n3;4;b\n")[0])
    assert line.startswith(f"{tmp_path}/in/t.csv: none of its first 2 row(s) has the header's 3 field(s)")


# --- whether a table has a header, and its decimal sign, from its types


@st.composite
def typed_tables(draw):
    """(names, rows, decimal, delimiter): columns of int, float, string and date values, at least one
    of them numbers or dates; names as headers have them (not numbers or dates); floats written
    with the decimal sign, with two places (three would be shaped as grouped thousands)."""
    kinds = draw(st.lists(st.sampled_from(["int", "float", "string", "date"]), min_size=1, max_size=5))
    if not set(kinds) - {"string"}:
        kinds.append(draw(st.sampled_from(["int", "float", "date"])))
    # One column of decimal-comma numbers is two columns of integers as well (46,70): not generated.
    decimal = draw(st.sampled_from([".", ","] if kinds != ["float"] else ["."]))
    delimiter = draw(st.sampled_from(CANDIDATES))
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z_]{0,7}", fullmatch=True), min_size=len(kinds), max_size=len(kinds), unique=True
        )
    )
    cell = {
        "int": st.integers(-(10**6), 10**6).map(str),
        "float": st.floats(-1e4, 1e4, allow_nan=False).map(lambda x: f"{x:.2f}".replace(".", decimal)),
        "string": st.from_regex(r"[A-Za-z][a-z ]{0,6}", fullmatch=True),
        "date": st.dates().map(lambda d: d.isoformat()),
    }
    first = [draw(cell[kind]) for kind in kinds]
    typed = [i for i, kind in enumerate(kinds) if kind != "string"]
    # Blank rows are no rows; a later row holds a value of a typed column (what tells a header).
    later = st.tuples(*(st.one_of(cell[kind], st.just("")) for kind in kinds)).map(list)
    later = later.filter(lambda row: any(row[i] for i in typed))
    rows = [first, *draw(st.lists(later, min_size=1, max_size=8))]
    return names, rows, decimal, delimiter, kinds


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=typed_tables(), header=st.booleans())
def test_a_header_and_a_decimal_comma_are_read_from_the_types_below_them(table, header):
    """Whatever the columns, delimiter and decimal sign: a first row of names over typed columns is
    a header, a first row of values is data, and numbers with a decimal comma are read as numbers;
    the job then reads back every row as written, and no row is lost to a header it does not have."""
    names, rows, decimal, delimiter, kinds = table
    text = written(names, rows, delimiter) if header else written(rows[0], rows[1:], delimiter)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.csv")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        columns, dialect = read_header(path)
        assert dialect.header == header
        assert columns == (tuple(names) if header else tuple(f"column_{n}" for n in range(1, len(names) + 1)))
        floats = [row[i] for row in rows for i, kind in enumerate(kinds) if kind == "float" and row[i]]
        if floats:
            assert dialect.decimal == decimal
        assert [tuple(r) for r in read_back(path, columns, dialect)] == [tuple(row) for row in rows]


def test_a_table_of_text_alone_is_read_with_a_header_as_pandas_reads_one(tmp_path):
    (tmp_path / "t.csv").write_text("cat,black\ndog,brown\n")
    assert read_header(str(tmp_path / "t.csv"))[0] == ("cat", "black")
    columns, dialect = read_header(str(tmp_path / "t.csv"), header=False, names=("animal", "colour"))
    assert columns == ("animal", "colour") and not dialect.header


@pytest.mark.parametrize(
    "head, settings, expected",
    [
        ("a,b\n1,2\n", {"names": ("x", "y")}, "csv.columns names the columns of files without a header row"),
        ("1,2\n3,4\n", {"names": ("x",)}, "csv.columns names 1 column(s), but its rows have 2 field(s)"),
    ],
)
def test_column_names_that_do_not_fit_the_files_are_refused(tmp_path, head, settings, expected):
    (tmp_path / "t.csv").write_text(head)
    with pytest.raises(DialectError, match=re.escape(expected)):
        read_header(str(tmp_path / "t.csv"), **settings)
