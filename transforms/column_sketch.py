"""What one column (one scalar feature) of one split holds, summed up in bounded memory however many
records pass, and written as the `FeatureNameStatistics` of tensorflow_metadata that TFDV, Facets
and BigQuery ML read.

A sketch takes each record's value once, merges with the sketches of other workers (a Beam
combine), and pickles as bytes. Exact: counts, missing values, min, max, zeros, NaNs, mean and
standard deviation (merged as Chan et al. do, so that sums of large numbers keep their precision).
Approximate, from Apache DataSketches, with bounds the library states: quantiles and histograms
(KLL), the most common values with their counts (frequent items: exact while a column has fewer
distinct values than the sketch's map holds), and the number of distinct values (HyperLogLog).

Numbers get TFDV's two histograms (STANDARD: equal-width buckets between min and max, the one
TFDV's Jensen-Shannon divergence compares; QUANTILES: buckets of equal counts); strings get
`top_values` and the `rank_histogram` TFDV's L-infinity distance compares. Numbers' most common
values and distinct estimate, which `num_stats` has no field for, are `custom_stats`.
"""

from __future__ import annotations

import math

import datasketches
from tensorflow_metadata.proto.v0 import statistics_pb2

INT, FLOAT, STRING = "INT", "FLOAT", "STRING"
KINDS = (INT, FLOAT, STRING)

HISTOGRAM_BUCKETS = 10  # as TFDV's default num_histogram_buckets and num_quantiles_histogram_buckets
TOP_VALUES = 20  # top_values kept, as TFDV's default num_top_values
RANK_BUCKETS = 1000  # rank_histogram buckets at most, as TFDV's default num_rank_histogram_buckets
KLL_K = 200  # KLL's accuracy: about 1.65% normalized rank error
HLL_LG_K = 12  # HyperLogLog's 2**12 buckets: about 1.6% relative error
FREQUENT_LG_MAX_K = 11  # frequent items' map of 2**11 slots: exact below 1,536 distinct values


class ColumnSketch:
    """One column's values in one split, of a kind in KINDS. `add(None)` counts a missing value."""

    def __init__(self, kind: str):
        if kind not in KINDS:
            raise ValueError(f"a column is one of {KINDS}, not {kind!r}")
        self.kind = kind
        self.count = self.missing = self.zeros = self.nans = self.length = 0
        self.mean = self.m2 = 0.0
        self.min = self.max = math.nan
        self._quantiles = datasketches.kll_doubles_sketch(KLL_K)
        self._distinct = datasketches.hll_sketch(HLL_LG_K)
        self._frequent = datasketches.frequent_strings_sketch(FREQUENT_LG_MAX_K)

    def add(self, value: int | float | str | None) -> None:
        if value is None:
            self.missing += 1
            return
        self.count += 1
        shown = value if self.kind == STRING else str(value)
        self._distinct.update(shown)
        self._frequent.update(shown)
        if self.kind == STRING:
            self.length += len(value)
        elif math.isnan(value):
            self.nans += 1
        else:
            self._add_number(float(value))

    def _add_number(self, x: float) -> None:
        n = self.count - self.nans
        delta = x - self.mean
        self.mean += delta / n
        self.m2 += delta * (x - self.mean)
        self.min, self.max = (x, x) if n == 1 else (min(self.min, x), max(self.max, x))
        self.zeros += x == 0
        self._quantiles.update(x)

    def merge(self, other: ColumnSketch) -> None:
        if other.kind != self.kind:
            raise ValueError(f"a {self.kind} column's sketch cannot take a {other.kind} one's")
        a, b = self.count - self.nans, other.count - other.nans
        if b:
            delta = other.mean - self.mean
            self.mean += delta * b / (a + b)
            self.m2 += other.m2 + delta * delta * a * b / (a + b)
            self.min, self.max = (
                (other.min, other.max) if not a else (min(self.min, other.min), max(self.max, other.max))
            )
        for name in ("count", "missing", "zeros", "nans", "length"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self._quantiles.merge(other._quantiles)
        union = datasketches.hll_union(HLL_LG_K)
        union.update(self._distinct)
        union.update(other._distinct)
        self._distinct = union.get_result()
        self._frequent.merge(other._frequent)

    def __getstate__(self) -> dict:
        state = {key: value for key, value in self.__dict__.items() if not key.startswith("_")}
        state["sketches"] = (
            self._quantiles.serialize(),
            self._distinct.serialize_compact(),
            self._frequent.serialize(),
        )
        return state

    def __setstate__(self, state: dict) -> None:
        quantiles, distinct, frequent = state.pop("sketches")
        self.__dict__.update(state)
        self._quantiles = datasketches.kll_doubles_sketch.deserialize(quantiles)
        self._distinct = datasketches.hll_sketch.deserialize(distinct)
        self._frequent = datasketches.frequent_strings_sketch.deserialize(frequent)

    @property
    def distinct(self) -> int:
        """The estimated number of distinct values, never more than the values counted."""
        return min(self.count, round(self._distinct.get_estimate()))

    def most_common(self, n: int) -> list[tuple[str, int]]:
        """Up to `n` (value, count) pairs, most common first (ties by value): counts are exact while
        the column has fewer distinct values than the sketch holds, else estimates."""
        items = self._frequent.get_frequent_items(datasketches.frequent_items_error_type.NO_FALSE_POSITIVES)
        return sorted(((value, estimate) for value, estimate, _, _ in items), key=lambda item: (-item[1], item[0]))[:n]

    def quantiles(self, fractions: list[float]) -> list[float]:
        """The values at `fractions` of the numbers (NaNs left out); [] when there are none."""
        return [] if self._quantiles.is_empty() else list(self._quantiles.get_quantiles(fractions))

    def to_proto(self, name: str) -> statistics_pb2.FeatureNameStatistics:
        feature = statistics_pb2.FeatureNameStatistics(type=self.kind)
        feature.path.step.append(name)
        common = statistics_pb2.CommonStatistics(
            num_non_missing=self.count,
            num_missing=self.missing,
            min_num_values=min(self.count, 1),
            max_num_values=min(self.count, 1),
            avg_num_values=float(bool(self.count)),
            tot_num_values=self.count,
        )
        if self.kind == STRING:
            top = self.most_common(RANK_BUCKETS)
            feature.string_stats.CopyFrom(
                statistics_pb2.StringStatistics(
                    common_stats=common, unique=self.distinct, avg_length=self.length / self.count if self.count else 0
                )
            )
            for value, count in top[:TOP_VALUES]:
                feature.string_stats.top_values.add(value=value, frequency=count)
            _rank_histogram(feature.string_stats.rank_histogram, top)
            return feature
        numbers = self.count - self.nans
        feature.num_stats.CopyFrom(statistics_pb2.NumericStatistics(common_stats=common, num_zeros=self.zeros))
        if numbers:
            stats = feature.num_stats
            stats.mean, stats.std_dev = self.mean, math.sqrt(self.m2 / numbers)
            stats.min, stats.max, stats.median = self.min, self.max, self.quantiles([0.5])[0]
        stats = feature.num_stats
        stats.histograms.append(self._standard_histogram())
        stats.histograms.append(self._quantiles_histogram())
        feature.custom_stats.add(name="distinct_estimate", num=self.distinct)
        _rank_histogram(feature.custom_stats.add(name="most_common").rank_histogram, self.most_common(TOP_VALUES))
        return feature

    def _standard_histogram(self) -> statistics_pb2.Histogram:
        histogram = statistics_pb2.Histogram(type=statistics_pb2.Histogram.STANDARD, num_nan=self.nans)
        if self._quantiles.is_empty():
            return histogram
        if self.min == self.max:
            histogram.buckets.add(low_value=self.min, high_value=self.max, sample_count=self.count - self.nans)
            return histogram
        width = (self.max - self.min) / HISTOGRAM_BUCKETS
        edges = [self.min + width * i for i in range(1, HISTOGRAM_BUCKETS)]
        below = [0.0, *(rank * self._quantiles.n for rank in self._quantiles.get_cdf(edges, inclusive=False)[:-1])]
        below.append(float(self._quantiles.n))
        for i in range(HISTOGRAM_BUCKETS):
            low = self.min + width * i
            high = self.max if i == HISTOGRAM_BUCKETS - 1 else low + width
            histogram.buckets.add(low_value=low, high_value=high, sample_count=below[i + 1] - below[i])
        return histogram

    def _quantiles_histogram(self) -> statistics_pb2.Histogram:
        histogram = statistics_pb2.Histogram(type=statistics_pb2.Histogram.QUANTILES, num_nan=self.nans)
        if self._quantiles.is_empty():
            return histogram
        edges = self.quantiles([i / HISTOGRAM_BUCKETS for i in range(HISTOGRAM_BUCKETS + 1)])
        share = self._quantiles.n / HISTOGRAM_BUCKETS
        for low, high in zip(edges, edges[1:], strict=False):
            histogram.buckets.add(low_value=low, high_value=high, sample_count=share)
        return histogram


def _rank_histogram(histogram: statistics_pb2.RankHistogram, values: list[tuple[str, int]]) -> None:
    for rank, (value, count) in enumerate(values):
        histogram.buckets.add(low_rank=rank, high_rank=rank, label=value, sample_count=count)
