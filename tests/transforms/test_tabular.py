"""CSV type inference and row encoding, on the DirectRunner with assert_that."""

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from transforms.tabular import ColumnType, InferSchema, Row, is_float, is_int64, parse_value

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
        (" 1", False),
    ],
)
def test_is_int64(value, expected):
    assert is_int64(value) is expected


@pytest.mark.parametrize("value, expected", [("1.5", True), ("-2", True), ("1e-3", True), ("abc", False), ("", False)])
def test_is_float(value, expected):
    assert is_float(value) is expected


def test_parse_value_errors_name_the_value():
    with pytest.raises(ValueError, match="'abc' is not an int64"):
        parse_value("abc", "int64")
    with pytest.raises(ValueError, match="not true/false"):
        parse_value("maybe", "bool")
    assert parse_value("TRUE", "bool") == 1 and parse_value("0", "bool") == 0
    assert parse_value("3", "float32") == 3.0 and isinstance(parse_value("3", "float32"), float)


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
                        "id": ColumnType("string", 0),  # one non-integer makes the column string
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
