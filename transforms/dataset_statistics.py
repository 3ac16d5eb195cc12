"""A dataset's statistics: for each split, its records and a transforms.column_sketch.ColumnSketch
of each column, written as the `DatasetFeatureStatisticsList` TFDV reads (one
`DatasetFeatureStatistics` per split, named after it). A record leaves out the columns it has no
value for (they count as missing); a column's kind is that of its first value, and a value of
another kind in it is a caller's mistake (TypeError), never a value silently dropped."""

from __future__ import annotations

from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import statistics_pb2

from transforms.column_sketch import ColumnSketch, kind_of

Value = int | float | str | bytes  # bytes: UTF-8 text, as a record stores a string


class DatasetStatistics:
    def __init__(self):
        self.records: dict[str, int] = {}
        self.columns: dict[str, dict[str, ColumnSketch]] = {}  # split -> column name -> sketch

    def add(self, split: str, values: Mapping[str, Value]) -> None:
        """One record of `split`, its values by column name."""
        self.records[split] = self.records.get(split, 0) + 1
        columns = self.columns.setdefault(split, {})
        for name, value in values.items():
            sketch = columns.get(name)
            if sketch is None:
                sketch = columns[name] = ColumnSketch(kind_of(value))
            elif kind_of(value) != sketch.kind:
                raise TypeError(f"column {name!r} holds {sketch.kind} values, and then a {kind_of(value)} one")
            sketch.add(value)

    def merge(self, other: DatasetStatistics) -> None:
        for split, n in other.records.items():
            self.records[split] = self.records.get(split, 0) + n
            mine = self.columns.setdefault(split, {})
            for name, sketch in other.columns[split].items():
                if name in mine:
                    mine[name].merge(sketch)
                else:
                    mine[name] = sketch

    def to_proto(self) -> statistics_pb2.DatasetFeatureStatisticsList:
        """One DatasetFeatureStatistics per split, splits and columns by name; a column of the
        dataset that a split holds no value of is in that split too, all missing."""
        kinds = {name: sketch.kind for columns in self.columns.values() for name, sketch in columns.items()}
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        for split in sorted(self.records):
            records = self.records[split]
            dataset = statistics.datasets.add(name=split, num_examples=records)
            columns = self.columns[split]
            for name in sorted(kinds):
                sketch = columns.get(name) or ColumnSketch(kinds[name])
                dataset.features.append(sketch.to_proto(name, records))
        return statistics
