"""A dataset's statistics: for each split, its records and a transforms.column_sketch.ColumnSketch
of each column, written as the `DatasetFeatureStatisticsList` TFDV reads (one
`DatasetFeatureStatistics` per split, named after it). Columns are fixed when the statistics are
made (`kinds`, name -> INT, FLOAT or STRING), so that every worker's statistics merge alike; a
record leaves out the columns it has no value for (counted missing)."""

from __future__ import annotations

from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import statistics_pb2

from transforms.column_sketch import ColumnSketch

Value = int | float | str | None


class DatasetStatistics:
    def __init__(self, kinds: Mapping[str, str]):
        self.kinds = dict(kinds)
        self.records: dict[str, int] = {}
        self.columns: dict[str, dict[str, ColumnSketch]] = {}

    def add(self, split: str, values: Mapping[str, Value]) -> None:
        """One record of `split`, by column name; a column in `values` that is not in `kinds` is a
        caller's mistake (KeyError), never a column silently dropped."""
        unknown = values.keys() - self.kinds.keys()
        if unknown:
            raise KeyError(f"columns {sorted(unknown)} are not among the statistics' {sorted(self.kinds)}")
        self.records[split] = self.records.get(split, 0) + 1
        columns = self._split(split)
        for name, sketch in columns.items():
            sketch.add(values.get(name))

    def merge(self, other: DatasetStatistics) -> None:
        if other.kinds != self.kinds:
            raise ValueError("statistics of other columns cannot merge")
        for split, n in other.records.items():
            self.records[split] = self.records.get(split, 0) + n
            mine = self._split(split)
            for name, sketch in other.columns[split].items():
                mine[name].merge(sketch)

    def _split(self, split: str) -> dict[str, ColumnSketch]:
        if split not in self.columns:
            self.columns[split] = {name: ColumnSketch(kind) for name, kind in self.kinds.items()}
        return self.columns[split]

    def to_proto(self) -> statistics_pb2.DatasetFeatureStatisticsList:
        """One DatasetFeatureStatistics per split that has records, splits and columns by name."""
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        for split in sorted(self.records):
            dataset = statistics.datasets.add(name=split, num_examples=self.records[split])
            for name in sorted(self.columns[split]):
                dataset.features.append(self.columns[split][name].to_proto(name))
        return statistics
