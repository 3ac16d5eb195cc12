"""CSV type inference and row encoding, on the DirectRunner with assert_that."""

import ast

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given
from hypothesis import strategies as st

from transforms.example_proto import MAX_EXAMPLE_BYTES
from transforms.outcomes import DEAD_LETTERS, DeadLetter
from transforms.tabular import (
    STRAY_TEXT_LIMIT,
    Columns,
    ColumnType,
    EncodeRows,
    InferSchema,
    NotedValues,
    Row,
    column_warnings,
    header_difference,
    hidden_match,
    is_float,
    is_int64,
    moved_by_float32,
    parse_value,
    stray_text_warning,
)

COLUMNS = ("id", "score", "name", "flag")


def rows(*values):
    return [Row(f"f.csv:{i + 2}", "train", v) for i, v in enumerate(values)]


@pytest.mark.parametrize(
    "value, expected",
    [
        ("12", True),
        ("-3", True),
        ("+7", True),
        ("1.0", False),
        ("1e3", False),
        ("9223372036854775807", True),
        ("9223372036854775808", False),
        ("", False),
        (" 1", True),  # as float() takes " 1.5": `1, 2` from a CSV written with ", " between fields
        ("7 ", True),
        ("1 2", False),
    ],
)
def test_is_int64(value, expected):
    assert is_int64(value) is expected


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1.5", True),
        ("-2", True),
        ("1e-3", True),
        ("abc", False),
        ("", False),
        ("1_000", False),  # Python's float() takes digit grouping; a CSV's "2023_01" is a code, not 202301
        ("2023_01", False),
        ("1_0.5", False),
    ],
)
def test_is_float(value, expected):
    assert is_float(value) is expected


def test_parse_value_errors_name_the_value():
    with pytest.raises(ValueError, match="'abc' is not an int64"):
        parse_value("abc", "int64")
    with pytest.raises(ValueError, match="not true/false"):
        parse_value("maybe", "bool")
    assert parse_value("TRUE", "bool") == 1 and parse_value("0", "bool") == 0
    assert parse_value("3", "float32") == 3.0 and isinstance(parse_value("3", "float32"), float)
    with pytest.raises(ValueError, match="'1_000' is not a number"):
        parse_value("1_000", "float32")


def test_infer_schema_over_all_rows():
    data = rows(
        ("1", "0.5", "ann", "true"), ("2", "3", "bob", "false"), ("3", "", "7", "true"), ("x", "1e2", "", "false")
    )
    with TestPipeline() as p:
        schema = p | beam.Create(data) | beam.CombineGlobally(InferSchema(COLUMNS, {"flag": "bool"}))
        assert_that(
            schema,
            equal_to(
                [
                    {
                        # one non-number makes the column string, and is named
                        "id": ColumnType("string", 0, NotedValues(1, 3, "f.csv:5", "x")),
                        "score": ColumnType("float32", 1),  # ints and floats -> float; one empty cell
                        "name": ColumnType("string", 1),
                        "flag": ColumnType("bool", 0),  # declared
                    }
                ]
            ),
        )


def test_infer_schema_merges_partial_accumulators():
    fn = InferSchema(("a",), {})
    left = fn.add_input(fn.create_accumulator(), Row("f:1", "train", ("1",)))
    right = fn.add_input(fn.create_accumulator(), Row("f:2", "train", ("2.5",)))
    assert fn.extract_output(fn.merge_accumulators([left, right])) == {"a": ColumnType("float32", 0)}


def _inferred(columns, data, declared=None):
    fn = InferSchema(columns, declared or {})
    return fn.extract_output(_added(fn, data))


def _added(fn, data):
    acc = fn.create_accumulator()
    for row in data:
        acc = fn.add_input(acc, row)
    return acc


def test_a_few_values_that_make_a_column_of_numbers_string_are_named():
    """A typo or a stray byte in one cell would turn a whole numeric column into strings, which
    the trainer would get without a word: the warning names the column, how many values and one."""
    data = rows(*[(str(i), f"{i}.5", "" if i % 3 else "n/a") for i in range(30)], ("7", "\x004", "n/a"))
    schema = _inferred(("a", "b", "c"), data)
    assert schema["a"] == ColumnType("int64", 0)
    assert schema["b"] == ColumnType("string", 0, NotedValues(1, 30, "f.csv:32", "\x004"))
    assert schema["c"] == ColumnType("string", 20)  # text only: nothing stray
    warning = stray_text_warning(Columns(("b",)), schema["b"].stray_text)
    assert warning.startswith("column 'b' is stored as strings: 1 of its 31 values is not a number")
    assert "f.csv:32: '\\x004'" in warning and "csv.schema" in warning
    assert "3 of its 10 values are not numbers" in stray_text_warning(
        Columns(("b",)), NotedValues(3, 7, "f.csv:2", "x")
    )


def test_a_text_column_or_a_declared_one_has_nothing_stray():
    past_the_limit = rows(
        *[(f"name{i}", "1") for i in range(STRAY_TEXT_LIMIT + 1)], *[(str(i), "x") for i in range(500)]
    )
    assert _inferred(("name", "code"), past_the_limit, {"code": "string"}) == {
        "name": ColumnType("string", 0),
        "code": ColumnType("string", 0),  # declared: nothing inferred
    }
    as_much_text = rows(("S",), ("M",), ("1",), ("2",))
    assert _inferred(("size",), as_much_text) == {"size": ColumnType("string", 0)}


def test_stray_text_merges_to_the_same_whatever_the_order():
    fn = InferSchema(("a",), {})
    parts = [rows(("1",), ("2",), ("3",)), [Row("g.csv:9", "train", ("oops",))], [Row("f.csv:7", "train", ("n/a",))]]
    accumulators = [_added(fn, part) for part in parts]
    merged = [fn.extract_output(fn.merge_accumulators(order)) for order in (accumulators, accumulators[::-1])]
    assert merged[0] == merged[1] == {"a": ColumnType("string", 0, NotedValues(2, 3, "f.csv:7", "n/a"))}


def test_numbers_written_with_leading_zeros_are_named_where_the_column_is_stored_as_numbers():
    """Zip codes and ids lose their leading zeros as int64 (or float32) without a word to the
    trainer: the warning names the column, how many values and one, as it is written and stored."""
    data = rows(
        ("02134", "1.5", "007", "0", "a1", "0"),
        ("90210", "00.25", "7", "0.5", "00", "-0"),
        ("-01", "3", "x", "10", "b2", "+0"),
    )
    schema = _inferred(("zip", "score", "code", "plain", "text", "signed"), data, {"code": "int64"})
    assert schema["zip"] == ColumnType("int64", 0, None, NotedValues(2, 3, "f.csv:2", "02134"))
    assert schema["score"] == ColumnType("float32", 0, None, NotedValues(1, 3, "f.csv:3", "00.25"))
    assert schema["code"] == ColumnType("int64", 0)  # declared: the user chose numbers
    assert schema["plain"] == ColumnType("float32", 0)  # "0", "0.5", "10": no digit is lost
    assert schema["text"] == ColumnType("string", 0)  # kept as written: nothing lost
    assert schema["signed"] == ColumnType("int64", 0)

    [warning] = column_warnings("zip", schema["zip"])
    assert warning == (
        "column 'zip' is stored as int64, which keeps no leading zeros: 2 of its 3 values have them (for example "
        "f.csv:2: '02134' is stored as 2134); declare it in csv.schema as string to keep the values as written, "
        "or as int64 to keep the numbers without this warning"
    )
    [warning] = column_warnings("score", schema["score"])
    assert "1 of its 3 values has them (for example f.csv:3: '00.25' is stored as 0.25)" in warning


def test_leading_zeros_merge_to_the_same_whatever_the_order():
    fn = InferSchema(("a",), {})
    parts = [rows(("1",), ("2",)), [Row("g.csv:9", "train", ("007",))], [Row("f.csv:7", "train", ("08",))]]
    accumulators = [_added(fn, part) for part in parts]
    merged = [fn.extract_output(fn.merge_accumulators(order)) for order in (accumulators, accumulators[::-1])]
    assert merged[0] == merged[1] == {"a": ColumnType("int64", 0, None, NotedValues(2, 4, "f.csv:7", "08"))}


def test_a_column_has_a_warning_for_each_thing_noted():
    stray = ColumnType("string", 0, NotedValues(1, 9, "f.csv:3", "n/a"))
    assert [w.split(":")[0] for w in column_warnings("a", stray)] == ["column 'a' is stored as strings"]
    assert column_warnings("a", ColumnType("int64", 2)) == []
    [spaced] = column_warnings(" name", ColumnType("string", 0))  # `id, name` then `1, ann`: " ann"
    assert spaced.startswith("column ' name' has spaces around its name, which its feature key keeps")


@pytest.mark.parametrize(
    "pattern, path, hidden",
    [
        ("/d/**/*.csv", "/d/.ipynb_checkpoints/t-checkpoint.csv", True),  # a copy of t.csv's rows
        ("/d/*.csv", "/d/._t.csv", True),  # a macOS resource fork
        ("gs://b/d/**/*.csv", "gs://b/d/x/.y/t.csv", True),
        ("/d/*.csv", "/d/t.csv", False),
        ("/d/*.csv", "/d/t.x.csv", False),
        ("/d/.cache/*.csv", "/d/.cache/t.csv", False),  # the pattern names the hidden folder itself
        ("/d/*/.x/*.csv", "/d/a/.x/t.csv", False),
        ("/d/*.csv", "/d/.t.csv", True),
        ("/d/.*.csv", "/d/.t.csv", False),
        ("/home/.me/d/*.csv", "/home/.me/d/t.csv", False),  # hidden above the wildcards: named
        ("/d/t.csv", "/d/t.csv", False),
    ],
)
def test_a_wildcard_matches_no_hidden_name(pattern, path, hidden):
    assert hidden_match(pattern, path) is hidden


@pytest.mark.parametrize(
    "value, moved",
    [
        ("16777216", False),  # 2**24: float32 holds every integer up to it
        ("16777217", True),
        ("-123456789", True),
        ("1700000037.5", True),  # a timestamp: held as 1700000000.0
        ("30000000", False),  # past 2**24 float32's step is 2: even integers are held
        ("1e7", False),
        ("3.0000001e7", True),
        ("1e39", True),  # past float32's range: held as inf
        ("inf", False),
        ("nan", False),
        ("12345.678", False),  # below 2**24 float32 is within 1 of any number
        ("0.30000000000000004", False),
    ],
)
def test_moved_by_float32(value, moved):
    assert moved_by_float32(value) is moved


def test_numbers_float32_moves_are_named_where_the_column_is_stored_as_float32():
    """Ids and timestamps in a column that one fraction made float32 are rounded to float32's
    steps past 2**24 without a word to the trainer: the warning names the column and one value."""
    data = rows(("1700000037.5", "123456789", "123456789"), ("0.5", "2.5", "1"), ("1700000100", "7", "3"))
    schema = _inferred(("ts", "ids", "count"), data, {"ids": "float32"})
    assert schema["ts"] == ColumnType("float32", 0, None, None, NotedValues(2, 3, "f.csv:2", "1700000037.5"))
    assert schema["ids"] == ColumnType("float32", 0)  # declared: the user chose float32
    assert schema["count"] == ColumnType("int64", 0)  # int64 holds them exactly
    [warning] = column_warnings("ts", schema["ts"])
    assert warning.startswith(
        "column 'ts' is stored as float32, which holds numbers of 16,777,216 or more only to the nearest of its "
        "steps (2 and up): 2 of its 3 values change by 1 or more (for example f.csv:2: '1700000037.5' is stored as "
        "1700000000.0); declare it in csv.schema as string"
    )


STRINGS = {"a": ColumnType("string", 0), "b": ColumnType("string", 0)}


def test_a_row_whose_example_tensorflow_could_not_parse_is_a_dead_letter():
    """A row past MAX_EXAMPLE_BYTES is a dead letter naming the row, not a record that crashes its
    reader (tests/transforms/test_example_proto.py: what TensorFlow parses)."""
    half = "x" * (1 << 30)
    [out] = EncodeRows(("a", "b")).process(Row("big.csv:2", "train", (half, half)), STRINGS)
    assert out.tag == DEAD_LETTERS
    assert out.value == DeadLetter(
        "big.csv:2",
        "encode",
        f"the Example would be up to 2,147,483,728 bytes; TensorFlow parses at most {MAX_EXAMPLE_BYTES:,}",
    )


_COLUMN = st.text("abcdefgh", min_size=1, max_size=3)


@given(
    columns=st.lists(_COLUMN, min_size=1, max_size=10, unique=True),  # shown whole
    data=st.data(),
)
def test_a_header_difference_names_exactly_the_columns_that_differ(columns, data):
    """What a file lacks and adds are the columns one has and the other has not; the columns it
    holds elsewhere, taken out of both, leave the rest in one order; and a header differs in some
    way it names whenever it differs at all."""
    kept = data.draw(st.permutations(data.draw(st.lists(st.sampled_from(columns), unique=True))))
    added = data.draw(st.lists(_COLUMN.filter(lambda c: c not in columns), max_size=3, unique=True))
    header = tuple(data.draw(st.permutations([*kept, *added])))
    text = header_difference(header, tuple(columns))
    parts = dict(part.split(" [", 1) for part in text.split("; ")) if text else {}
    named = {what: ast.literal_eval("[" + rest) for what, rest in parts.items()}  # as `shown` wrote them
    assert named.get("it lacks", []) == [c for c in columns if c not in header]
    assert named.get("it adds", []) == [c for c in header if c not in columns]
    moved = named.get("it holds in another place", [])
    assert [c for c in header if c in columns and c not in moved] == [
        c for c in columns if c in header and c not in moved
    ]
    assert bool(text) == (header != tuple(columns))


def test_a_header_difference_names_a_column_named_twice():
    assert header_difference(("a", "b", "a"), ("a", "b")) == "it names more than once ['a']"
