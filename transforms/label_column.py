"""The class column of a table (csv.label): its classes, as the manifest's label map names them.

A string label column (`setosa`, `versicolor`) is stored as class ids, as Hugging Face's
`ClassLabel` and the image kinds' label map store labels, so that a reader trains on it without a
vocabulary of its own and the trainer takes the number of classes from the manifest. Its classes
are sorted, except that a refresh keeps the ids of the previous version's and puts new ones after
them (kept_ids). An int64 column of class ids 0..K-1 is stored as it is, its classes named "0" to
"K-1". A float32 column is a target to regress, with no classes. No Beam.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.shown import quoted
from transforms.csv_numbers import is_int64

# Classes a label column may have: more are not classes of one label (ids, free text). Its values
# are held by every worker's tally until then.
MAX_CLASSES = 100_000


def kept_ids(previous: tuple[str, ...], labels: Iterable[str]) -> tuple[str, ...]:
    """The label map of a new version of a dataset whose previous version had `previous`: every id
    keeps its class (a class without sources now keeps its id, with no records), and labels new to
    this version follow, sorted. A sorted map would move every id after a new class's name, and a
    model trained on the previous version would read the new records with the wrong classes."""
    return previous + tuple(sorted(set(labels) - set(previous)))


def label_classes(dtype: str, values: set[str] | None, known: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The classes of a label column of `dtype` whose non-empty values are `values` (None: more
    than MAX_CLASSES of them), after the `known` ones of a previous version; None when it has none
    to name: a float32 target, integers outside 0..MAX_CLASSES-1, or too many values."""
    if values is None or dtype == "float32":
        return None
    if dtype == "string":
        return kept_ids(known, values)
    if dtype == "bool":
        return tuple(str(i) for i in range(max(2, len(known))))
    ids = {int(value) for value in values if is_int64(value)}  # others are the dead letters of a declared int64
    if ids and (min(ids) < 0 or max(ids) >= MAX_CLASSES):
        return None
    return tuple(str(i) for i in range(max(max(ids, default=-1) + 1, len(known))))


def label_warnings(column: str, dtype: str, values: set[str] | None) -> list[str]:
    """Why a label column of `dtype` has no classes where a user may expect some."""
    if values is None:
        return [
            f"label column {quoted(column)} has more than {MAX_CLASSES:,} different values: it is stored as it is, "
            "not as classes (is it a label?)"
        ]
    if dtype == "int64" and label_classes(dtype, values) is None:
        ids = sorted(int(value) for value in values if is_int64(value))
        return [
            f"label column {quoted(column)} holds integers from {ids[0]} to {ids[-1]}, not class ids 0..K-1 (at most "
            f"{MAX_CLASSES:,}): it is stored as it is, without classes; declare it string in csv.schema to store its "
            "values as classes"
        ]
    return []
