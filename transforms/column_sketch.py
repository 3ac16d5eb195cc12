"""What one column (one scalar feature) of one split holds, summed up in bounded memory however many
records pass, and written as the `FeatureNameStatistics` of tensorflow_metadata that TFDV, Facets
and BigQuery ML read.

A sketch takes values a batch at a time (`add_batch`: numpy, and Apache DataSketches' vector
updates): a call per value into a sketch library costs more than encoding the value did. It merges
with the sketches of other workers (a Beam combine) and pickles as bytes.

Exact: counts, NaNs, zeros, min, max, mean and standard deviation (batches merged as Chan et al.
do, so that sums of large numbers keep their precision), and, while a column holds at most
EXACT_VALUES distinct values, each value's count. Past that bound the counts give way to sketches
with the error bounds DataSketches states: the number of distinct values (HyperLogLog) and, for
strings, the most common ones (frequent items). A number column past the bound keeps no list of
most common values (TFDV keeps none for numbers: its histograms describe them). Quantiles and
histograms come from a KLL sketch.

Numbers get TFDV's two histograms (STANDARD: equal-width buckets between min and max, which TFDV's
Jensen-Shannon divergence compares; QUANTILES: buckets of equal counts); strings get `top_values`
and the `rank_histogram` that TFDV's L-infinity distance compares. A number column's distinct
estimate and most common values, which `num_stats` has no field for, are `custom_stats`.
"""

from __future__ import annotations

import collections
import math

import datasketches
import numpy as np
from tensorflow_metadata.proto.v0 import statistics_pb2

INT, FLOAT, STRING = "INT", "FLOAT", "STRING"
KINDS = (INT, FLOAT, STRING)

EXACT_VALUES = 1000  # distinct values counted exactly, per column and split
HISTOGRAM_BUCKETS = 10  # as TFDV's default num_histogram_buckets and num_quantiles_histogram_buckets
TOP_VALUES = 20  # top_values kept, as TFDV's default num_top_values
RANK_BUCKETS = 1000  # rank_histogram buckets at most, as TFDV's default num_rank_histogram_buckets
KLL_K = 200  # KLL's accuracy: about 1.65% normalized rank error
HLL_LG_K = 12  # HyperLogLog's 2**12 buckets: about 1.6% relative error
FREQUENT_LG_MAX_K = 10  # frequent strings' map of 2**10 slots, once past EXACT_VALUES


_KIND_OF_TYPE = {int: INT, bool: INT, float: FLOAT, str: STRING, bytes: STRING}


def kind_of(values: list) -> str:
    """The kind of column values of Python's types belong in (bytes: UTF-8 text, as a record
    stores a string); TypeError naming the types when they are of more than one kind."""
    kinds = {_KIND_OF_TYPE.get(t) for t in set(map(type, values))}
    if len(kinds) != 1 or None in kinds:
        raise TypeError(f"values of {sorted(t.__name__ for t in set(map(type, values)))}: not one kind of column")
    return kinds.pop()


class ColumnSketch:
    """One column's values in one split, of a kind in KINDS. Missing values are not added: the
    split's record count less `count` (to_proto)."""

    def __init__(self, kind: str):
        if kind not in KINDS:
            raise ValueError(f"a column is one of {KINDS}, not {kind!r}")
        self.kind = kind
        self.count = self.zeros = self.nans = self.length = 0
        self.mean = self.m2 = 0.0
        self.min = self.max = None
        self.exact: dict | None = {}  # value -> count, while at most EXACT_VALUES
        self._quantiles = datasketches.kll_doubles_sketch(KLL_K)
        self._distinct: datasketches.hll_sketch | None = None  # once past EXACT_VALUES
        self._frequent: datasketches.frequent_strings_sketch | None = None  # strings past EXACT_VALUES

    def add_batch(self, values: list) -> None:
        """Values of the column's kind (bytes for STRING: UTF-8 text, as a record stores it)."""
        if not values:
            return
        self.count += len(values)
        if self.kind == STRING:
            self.length += sum(map(len, values))
            counted = collections.Counter(values)  # by hash: numpy sorts Python objects slowly
            self._count_values(list(counted), list(counted.values()))
            return
        numbers = np.array(values, dtype=np.int64 if self.kind == INT else np.float64)
        if self.kind == FLOAT:
            nan = np.isnan(numbers)
            self.nans += int(nan.sum())
            numbers = numbers[~nan]
        self._add_numbers(numbers)
        uniques, counts = np.unique(numbers, return_counts=True)
        self._count_values(uniques.tolist(), counts.tolist())

    def _add_numbers(self, numbers: np.ndarray) -> None:
        if not len(numbers):
            return
        floats = numbers.astype(np.float64)
        mean = float(floats.mean())
        self._merge_moments(len(floats), mean, float(((floats - mean) ** 2).sum()))
        self._merge_range(numbers.min().item(), numbers.max().item())
        self.zeros += int(np.count_nonzero(numbers == 0))
        self._quantiles.update(floats)

    def _merge_moments(self, b: int, mean: float, m2: float) -> None:
        a = self.count - self.nans - b  # the numbers summed up before these
        delta = mean - self.mean
        self.mean += delta * b / (a + b)
        self.m2 += m2 + delta * delta * a * b / (a + b)

    def _merge_range(self, low: int | float, high: int | float) -> None:
        self.min, self.max = (low, high) if self.min is None else (min(self.min, low), max(self.max, high))

    def _count_values(self, values: list, counts: list[int]) -> None:
        if self.exact is None:
            self._sketch_values(values, counts)
            return
        for value, n in zip(values, counts, strict=True):
            self.exact[value] = self.exact.get(value, 0) + n
        if len(self.exact) > EXACT_VALUES:
            self._to_sketches()

    def _to_sketches(self) -> None:
        """Past the bound: the sketches take over from the exact counts."""
        values, counts = list(self.exact), list(self.exact.values())
        self.exact = None
        self._distinct = datasketches.hll_sketch(HLL_LG_K)
        if self.kind == STRING:
            self._frequent = datasketches.frequent_strings_sketch(FREQUENT_LG_MAX_K)
        self._sketch_values(values, counts)

    def _sketch_values(self, values: list, counts: list[int]) -> None:
        if self.kind == STRING:
            values = list(map(_text, values))
        for value, n in zip(values, counts, strict=True):
            self._distinct.update(value)
            if self._frequent is not None:
                self._frequent.update(value, n)

    def merge(self, other: ColumnSketch) -> None:
        if other.kind != self.kind:
            raise ValueError(f"a {self.kind} column's sketch cannot take a {other.kind} one's")
        numbers = other.count - other.nans
        self.count += other.count
        self.nans += other.nans
        self.zeros += other.zeros
        self.length += other.length
        if numbers:
            self._merge_moments(numbers, other.mean, other.m2)
            self._merge_range(other.min, other.max)
        self._quantiles.merge(other._quantiles)
        if other.exact is not None:
            self._count_values(list(other.exact), list(other.exact.values()))
            return
        if self.exact is not None:
            self._to_sketches()
        union = datasketches.hll_union(HLL_LG_K)
        union.update(self._distinct)
        union.update(other._distinct)
        self._distinct = union.get_result()
        if self._frequent is not None:
            self._frequent.merge(other._frequent)

    def __getstate__(self) -> dict:
        state = {key: value for key, value in self.__dict__.items() if not key.startswith("_")}
        state["sketches"] = (
            self._quantiles.serialize(),
            None if self._distinct is None else self._distinct.serialize_compact(),
            None if self._frequent is None else self._frequent.serialize(),
        )
        return state

    def __setstate__(self, state: dict) -> None:
        quantiles, distinct, frequent = state.pop("sketches")
        self.__dict__.update(state)
        self._quantiles = datasketches.kll_doubles_sketch.deserialize(quantiles)
        self._distinct = None if distinct is None else datasketches.hll_sketch.deserialize(distinct)
        self._frequent = None if frequent is None else datasketches.frequent_strings_sketch.deserialize(frequent)

    @property
    def distinct(self) -> int:
        """The number of distinct values: exact within the bound, else estimated (never more than
        the values counted)."""
        if self.exact is not None:
            return len(self.exact)
        return min(self.count, round(self._distinct.get_estimate()))

    def most_common(self, n: int) -> list[tuple[str, int]] | None:
        """Up to `n` (value, count) pairs, most common first (ties by value), values as text:
        exact within the bound; a string column's estimates past it; None for a number column
        past it."""
        if self.exact is not None:
            pairs = self.exact.items()
        elif self._frequent is not None:
            error = datasketches.frequent_items_error_type.NO_FALSE_POSITIVES
            pairs = [(value, estimate) for value, estimate, _, _ in self._frequent.get_frequent_items(error)]
        else:
            return None
        return sorted(((_text(value), count) for value, count in pairs), key=lambda item: (-item[1], item[0]))[:n]

    def quantiles(self, fractions: list[float]) -> list[float]:
        """The values at `fractions` of the numbers (NaNs left out); [] when there are none."""
        return [] if self._quantiles.is_empty() else list(self._quantiles.get_quantiles(fractions))

    def to_proto(self, name: str, records: int) -> statistics_pb2.FeatureNameStatistics:
        """The column's statistics in a split of `records` records: those without a value are its
        missing ones."""
        feature = statistics_pb2.FeatureNameStatistics(type=self.kind)
        feature.path.step.append(name)
        present = min(self.count, 1)
        common = statistics_pb2.CommonStatistics(
            num_non_missing=self.count,
            num_missing=records - self.count,
            min_num_values=present,
            max_num_values=present,
            avg_num_values=float(present),
            tot_num_values=self.count,
        )
        if self.kind == STRING:
            top = self.most_common(RANK_BUCKETS)
            stats = feature.string_stats
            stats.common_stats.CopyFrom(common)
            stats.unique = self.distinct
            stats.avg_length = self.length / self.count if self.count else 0.0
            for value, count in top[:TOP_VALUES]:
                stats.top_values.add(value=value, frequency=count)
            _rank_histogram(stats.rank_histogram, top)
            return feature
        stats = feature.num_stats
        stats.common_stats.CopyFrom(common)
        stats.num_zeros = self.zeros
        if self.min is not None:
            stats.mean, stats.std_dev = self.mean, math.sqrt(self.m2 / (self.count - self.nans))
            stats.min, stats.max, stats.median = self.min, self.max, self.quantiles([0.5])[0]
        stats.histograms.append(self._standard_histogram())
        stats.histograms.append(self._quantiles_histogram())
        feature.custom_stats.add(name="distinct_estimate", num=self.distinct)
        top = self.most_common(TOP_VALUES)
        if top is not None:
            _rank_histogram(feature.custom_stats.add(name="most_common").rank_histogram, top)
        return feature

    def _standard_histogram(self) -> statistics_pb2.Histogram:
        histogram = statistics_pb2.Histogram(type=statistics_pb2.Histogram.STANDARD, num_nan=self.nans)
        if self.min is None:
            return histogram
        numbers = self.count - self.nans
        if self.min == self.max:
            histogram.buckets.add(low_value=self.min, high_value=self.max, sample_count=numbers)
            return histogram
        width = (self.max - self.min) / HISTOGRAM_BUCKETS
        edges = [self.min + width * i for i in range(HISTOGRAM_BUCKETS + 1)]
        edges[-1] = self.max
        ranks = [0.0, *self._quantiles.get_cdf(edges[1:-1], inclusive=False)[:-1], 1.0]
        for i in range(HISTOGRAM_BUCKETS):
            count = (ranks[i + 1] - ranks[i]) * numbers
            histogram.buckets.add(low_value=edges[i], high_value=edges[i + 1], sample_count=count)
        return histogram

    def _quantiles_histogram(self) -> statistics_pb2.Histogram:
        histogram = statistics_pb2.Histogram(type=statistics_pb2.Histogram.QUANTILES, num_nan=self.nans)
        if self.min is None:
            return histogram
        edges = self.quantiles([i / HISTOGRAM_BUCKETS for i in range(HISTOGRAM_BUCKETS + 1)])
        share = (self.count - self.nans) / HISTOGRAM_BUCKETS
        for low, high in zip(edges, edges[1:], strict=False):
            histogram.buckets.add(low_value=low, high_value=high, sample_count=share)
        return histogram


def _text(value: int | float | str | bytes) -> str:
    """A value as text: bytes as the UTF-8 they hold."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _rank_histogram(histogram: statistics_pb2.RankHistogram, values: list[tuple[str, int]]) -> None:
    for rank, (value, count) in enumerate(values):
        histogram.buckets.add(low_rank=rank, high_rank=rank, label=value, sample_count=count)
