"""transforms.column_sketch against exact figures computed from the values themselves: a column's
values, cut into bundles in any way and merged in any order (as a Beam combine does), give the
same exact statistics as all of them at once, and approximations within the sketches' bounds."""

from __future__ import annotations

import collections
import math
import pickle
import statistics

import datasketches
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow_metadata.proto.v0 import statistics_pb2

from transforms.column_sketch import (
    EXACT_VALUES,
    FLOAT,
    FREQUENT_LG_MAX_K,
    HISTOGRAM_BUCKETS,
    INT,
    STRING,
    TOP_VALUES,
    ColumnSketch,
)


def pool_of(kind: str, distinct: int, seed: int) -> list:
    """`distinct` values of a column of `kind`, all different."""
    rng = np.random.default_rng(seed)
    numbers = rng.choice(2**62, size=distinct, replace=False) - 2**61
    if kind == INT:
        return numbers.tolist()
    if kind == FLOAT:
        return [*(numbers[1:] / 7.0).tolist(), math.nan]
    return [f"v{n}" for n in numbers.tolist()]


@st.composite
def bundles(draw, kind):
    """A column's values (None for missing), of few distinct ones or more than EXACT_VALUES, and
    cuts of them into bundles."""
    distinct = draw(st.sampled_from([1, 5, 2 * EXACT_VALUES]))
    pool = pool_of(kind, distinct, draw(st.integers(0, 2**32)))
    zero = [0] if kind == INT else [0.0] if kind == FLOAT else [""]
    values = draw(st.lists(st.one_of(st.none(), st.sampled_from(pool + zero)), max_size=3000))
    if distinct > EXACT_VALUES:
        values += pool  # each value at least once: past the bound
    cuts = sorted(draw(st.lists(st.integers(0, len(values)), max_size=5)))
    edges = [0, *cuts, len(values)]
    return values, [values[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def sketched(kind, bundle_values, order=None) -> ColumnSketch:
    """Each bundle sketched apart (missing values left out), pickled as Beam ships accumulators,
    then merged."""
    parts = []
    for values in bundle_values:
        part = ColumnSketch(kind)
        for batch in (values[:1000], values[1000:]):
            part.add_batch([value for value in batch if value is not None])
        parts.append(pickle.loads(pickle.dumps(part)))
    merged = ColumnSketch(kind)
    for i in order or range(len(parts)):
        merged.merge(parts[i])
    return merged


@pytest.mark.parametrize("kind", [INT, FLOAT])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_exact_figures_of_numbers_hold_however_the_values_are_bundled(kind, data):
    values, parts = data.draw(bundles(kind))
    order = data.draw(st.permutations(range(len(parts))))
    feature = sketched(kind, parts, order).to_proto("x", len(values))
    present = [v for v in values if v is not None]
    numbers = [v for v in present if not math.isnan(v)]
    stats = feature.num_stats
    assert feature.type == statistics_pb2.FeatureNameStatistics.Type.Value(kind)
    assert stats.common_stats.num_non_missing == len(present)
    assert stats.common_stats.num_missing == len(values) - len(present)
    assert stats.num_zeros == sum(v == 0 for v in numbers)
    assert stats.histograms[0].num_nan == len(present) - len(numbers)
    if numbers:
        assert (stats.min, stats.max) == (float(min(numbers)), float(max(numbers)))  # doubles in the proto
        floats = [float(v) for v in numbers]
        assert stats.mean == pytest.approx(statistics.fmean(floats), rel=1e-9, abs=1e-6)
        assert stats.std_dev == pytest.approx(statistics.pstdev(floats), rel=1e-6, abs=1e-3)
        assert sum(b.sample_count for b in stats.histograms[0].buckets) == pytest.approx(len(numbers))
    else:
        assert not stats.histograms[0].buckets


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_strings_most_common_values_are_exact_within_the_bound_and_estimated_past_it(data):
    values, parts = data.draw(bundles(STRING))
    feature = sketched(STRING, parts).to_proto("s", len(values))
    present = [v for v in values if v is not None]
    counts = collections.Counter(present)
    expected = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    stats = feature.string_stats
    assert stats.common_stats.num_non_missing == len(present)
    assert stats.avg_length == pytest.approx(sum(map(len, present)) / len(present) if present else 0)
    if len(counts) <= EXACT_VALUES:
        assert [(t.value, t.frequency) for t in stats.top_values] == expected[:TOP_VALUES]
        assert [(b.label, b.sample_count) for b in stats.rank_histogram.buckets] == expected
        assert stats.unique == len(counts)
    else:
        assert abs(stats.unique - len(counts)) <= 0.05 * len(counts)
        error = datasketches.frequent_strings_sketch.get_epsilon_for_lg_size(FREQUENT_LG_MAX_K) * len(present)
        for top in stats.top_values:  # a value of the column, counted within the sketch's error
            assert abs(top.frequency - counts[top.value]) <= error


def test_quantiles_histogram_and_distinct_estimate_of_a_million_values_are_within_their_bounds():
    rng = np.random.default_rng(7)
    values = rng.lognormal(3, 1, 1_000_000)
    sketch = sketched(FLOAT, [part.tolist() for part in np.array_split(values, 8)])
    stats = sketch.to_proto("size", len(values)).num_stats
    assert stats.median == pytest.approx(np.median(values), rel=0.02)
    edges = [b.low_value for b in stats.histograms[1].buckets]
    ranks = np.searchsorted(np.sort(values), edges) / len(values)
    assert np.abs(ranks - np.arange(HISTOGRAM_BUCKETS) / HISTOGRAM_BUCKETS).max() < 0.02
    counts, _ = np.histogram(values, bins=HISTOGRAM_BUCKETS, range=(values.min(), values.max()))
    sampled = np.array([b.sample_count for b in stats.histograms[0].buckets])
    assert np.abs(sampled - counts).max() < 0.02 * len(values)
    distinct = next(c.num for c in sketch.to_proto("size", len(values)).custom_stats if c.name == "distinct_estimate")
    assert distinct == pytest.approx(len(np.unique(values)), rel=0.05)


def test_a_sketch_of_a_million_values_pickles_small():
    sketch = ColumnSketch(STRING)
    for batch in range(250):
        sketch.add_batch([f"value-{i % 50_000}" for i in range(batch * 4000, (batch + 1) * 4000)])
    assert len(pickle.dumps(sketch)) < 200_000


def test_a_sketch_refuses_another_kinds():
    with pytest.raises(ValueError, match="INT column's sketch cannot take a STRING"):
        ColumnSketch(INT).merge(ColumnSketch(STRING))
