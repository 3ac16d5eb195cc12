"""transforms.label_column: a table's label column becomes classes, the same however the runner
splits the rows between workers, and stable across versions; InferSchema finds them in the pass
that types the columns, and encode_row stores a string label as its class id."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from transforms.label_column import MAX_CLASSES, kept_ids, label_classes, label_warnings
from transforms.outcomes import DeadLetter
from transforms.tabular import InferSchema, Row, encode_row

labels = st.lists(st.sampled_from(["cat", "dog", "ant", " cat", "Cat", "é"]), min_size=1, max_size=40)


def combined(columns, rows, parts, label, known=()):
    """InferSchema over `rows`, its accumulators made over `parts` of them and merged, as workers do."""
    infer = InferSchema(columns, {}, ".", label, known)
    accumulators = []
    for part in parts:
        acc = infer.create_accumulator()
        for row in part:
            acc = infer.add_input(acc, row)
        accumulators.append(acc)
    return infer.extract_output(infer.merge_accumulators(accumulators))


@given(labels, st.lists(st.integers(0, 40), max_size=4), st.lists(st.sampled_from(["cat", "yak"]), max_size=2))
def test_the_classes_are_the_same_however_the_rows_are_split_between_workers(values, cuts, known):
    rows = [Row(f"t.csv:{i}", "train", (str(i), value)) for i, value in enumerate(values)]
    cuts = sorted(min(c, len(rows)) for c in cuts)
    parts = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    schema = combined(("x", "y"), rows, parts, "y", tuple(dict.fromkeys(known)))
    expected = kept_ids(tuple(dict.fromkeys(known)), values)
    assert (
        schema["y"].classes
        == expected
        == combined(("x", "y"), rows, [rows], "y", tuple(dict.fromkeys(known)))["y"].classes
    )
    assert schema["y"].stored_dtype == "int64" and schema["x"].classes is None
    for row in rows:
        record = encode_row(row, ("x", "y"), schema, ".", "y")
        assert record.label == row.values[1]  # counted under its class


def test_more_values_than_classes_leave_the_column_as_it_is_with_a_warning():
    rows = [Row(f"t.csv:{i}", "train", (f"id{i}",)) for i in range(MAX_CLASSES + 1)]
    [half, rest] = rows[: len(rows) // 2], rows[len(rows) // 2 :]
    schema = combined(("id",), rows, [half, rest], "id")
    assert schema["id"].classes is None and schema["id"].stored_dtype == "string"
    [warning] = schema["id"].class_warnings
    assert f"more than {MAX_CLASSES:,} different values" in warning


def test_int_labels_are_their_own_ids_and_others_have_no_classes():
    assert label_classes("int64", {"2", "0"}) == ("0", "1", "2")
    assert label_classes("int64", {"1"}, known=("0", "1", "2", "3")) == ("0", "1", "2", "3")
    assert label_classes("int64", {"-1", "3"}) is None
    assert "from -1 to 3" in label_warnings("y", "int64", {"-1", "3"})[0]
    assert label_classes("float32", {"0.5"}) is None and label_warnings("y", "float32", {"0.5"}) == []
    assert label_classes("bool", {"true"}) == ("0", "1")


def test_a_row_without_a_label_is_a_dead_letter_not_a_record():
    schema = combined(
        ("x", "y"), [Row("t.csv:2", "train", ("1", "cat"))], [[Row("t.csv:2", "train", ("1", "cat"))]], "y"
    )
    outcome = encode_row(Row("t.csv:3", "train", ("2", "")), ("x", "y"), schema, ".", "y")
    assert outcome == DeadLetter("t.csv:3", "parse", "no value in the label column 'y'")
