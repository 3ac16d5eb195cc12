"""A dataset's statistics: for each split, its records and a transforms.column_sketch.ColumnSketch
of each column, written as the `DatasetFeatureStatisticsList` TFDV reads (one
`DatasetFeatureStatistics` per split, named after it). A record leaves out the columns it has no
value for (they count as missing). Records wait in a list per split until BATCH of them came, and
their values go to the sketches a column at a time: adding a record costs an append. A column's
kind is that of its values; values of two kinds in one column are a caller's mistake (TypeError),
never values silently dropped."""

from __future__ import annotations

import operator
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import statistics_pb2

from transforms.column_sketch import ColumnSketch, kind_of

Value = int | float | str | bytes  # bytes: UTF-8 text, as a record stores a string
BATCH = 4096  # records of a split whose values wait before they are summed up


class DatasetStatistics:
    def __init__(self):
        self.records: dict[str, int] = {}
        self.columns: dict[str, dict[str, ColumnSketch]] = {}  # split -> column name -> sketch
        self._waiting: dict[str, list[Mapping[str, Value]]] = {}  # split -> records' values

    def add(self, split: str, values: Mapping[str, Value]) -> None:
        """One record of `split`, its values by column name (not changed afterwards)."""
        waiting = self._waiting.get(split)
        if waiting is None:
            waiting = self._waiting[split] = []
        waiting.append(values)
        if len(waiting) == BATCH:
            self._sum_up()

    def _sum_up(self) -> None:
        for split, waiting in self._waiting.items():
            self.records[split] = self.records.get(split, 0) + len(waiting)
            columns = self.columns.setdefault(split, {})
            for name in set().union(*waiting):
                values = _column(waiting, name)
                sketch = columns.get(name)
                if sketch is None:
                    sketch = columns[name] = ColumnSketch(kind_of(values))
                elif kind_of(values) != sketch.kind:
                    raise TypeError(f"column {name!r} holds {sketch.kind} values, and then {kind_of(values)} ones")
                sketch.add_batch(values)
        self._waiting = {}

    def merge(self, other: DatasetStatistics) -> None:
        self._sum_up()
        other._sum_up()
        for split, n in other.records.items():
            self.records[split] = self.records.get(split, 0) + n
            mine = self.columns.setdefault(split, {})
            for name, sketch in other.columns.get(split, {}).items():
                if name in mine:
                    mine[name].merge(sketch)
                else:
                    mine[name] = sketch

    def __getstate__(self) -> dict:
        self._sum_up()
        return self.__dict__

    def to_proto(self) -> statistics_pb2.DatasetFeatureStatisticsList:
        """One DatasetFeatureStatistics per split, splits and columns by name; a column of the
        dataset that a split holds no value of is in that split too, all missing."""
        self._sum_up()
        kinds = {name: sketch.kind for columns in self.columns.values() for name, sketch in columns.items()}
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        for split in sorted(self.records):
            records = self.records[split]
            dataset = statistics.datasets.add(name=split, num_examples=records)
            columns = self.columns.get(split, {})
            for name in sorted(kinds):
                sketch = columns.get(name) or ColumnSketch(kinds[name])
                dataset.features.append(sketch.to_proto(name, records))
        return statistics


def _column(records: list[Mapping[str, Value]], name: str) -> list[Value]:
    """The values of column `name` in the records that have one."""
    try:
        return list(map(operator.itemgetter(name), records))  # every record has one: the usual case
    except KeyError:
        return [record[name] for record in records if name in record]
