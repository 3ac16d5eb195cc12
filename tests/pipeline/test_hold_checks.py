"""pipeline.hold_checks: a version is held exactly when one of its checks fails, each failure one
line with the figure before and after; an unchanged dataset, or one that grew alike, is never held."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.contract.manifest import Counts, FeatureSpec, Manifest, SplitInfo
from pipeline.config import HoldConfig
from pipeline.hold_checks import held_checks
from transforms.dataset_statistics import DatasetStatistics

HOLD = HoldConfig()


def manifest(labels: dict[str, int], errors: int = 0, features: dict[str, str] | None = None) -> Manifest:
    written = sum(labels.values())
    return Manifest(
        kind="csv",
        splits={"train": SplitInfo("train", written, (), label_counts=dict(labels))},
        features={name: FeatureSpec(name, dtype) for name, dtype in (features or {"x": "float32"}).items()},
        counts=Counts(listed=written + errors, written=written, converted=0, skipped=0, errors=errors),
        error_fraction=errors / max(written + errors, 1),
    )


def statistics(centre: float, records: int, seed: int):
    found = DatasetStatistics()
    for x in np.random.default_rng(seed).normal(centre, 1, records).tolist():
        found.add("train", {"x": x})
    return found.to_proto()


labels = st.dictionaries(st.sampled_from(["cat", "dog", "bird", "fish"]), st.integers(50, 5000), min_size=1)


@settings(max_examples=50, deadline=None)
@given(labels=labels, growth=st.floats(1.0, 3.0), seed=st.integers(0, 2**32 - 1))
def test_a_dataset_that_grew_alike_is_published(labels, growth, seed):
    grown = {label: round(n * growth) for label, n in labels.items()}
    before, after = statistics(0, 3000, seed), statistics(0, round(3000 * growth), seed + 1)
    assert held_checks(manifest(labels), manifest(grown), before, after, HOLD) == []


@settings(max_examples=50, deadline=None)
@given(labels=labels, kept=st.floats(0.0, 0.79))
def test_records_down_by_more_than_the_bound_are_held(labels, kept):
    fewer = {label: round(n * kept) for label, n in labels.items()}
    if sum(fewer.values()) >= 0.8 * sum(labels.values()):
        return
    lines = held_checks(manifest(labels), manifest(fewer), None, statistics(0, 10, 0), HOLD)
    assert any(line.startswith(f"records: {sum(labels.values()):,} -> {sum(fewer.values()):,}") for line in lines)


def test_a_class_that_disappeared_is_held_by_name():
    lines = held_checks(
        manifest({"cat": 1000, "dog": 1000, "bird": 30}), manifest({"cat": 1010, "dog": 1020}), None, None, HOLD
    )
    assert "class 'bird': 30 records -> none (it disappeared)" in lines


def test_a_label_distribution_that_moved_is_held_with_its_shares():
    lines = held_checks(manifest({"cat": 500, "dog": 500}), manifest({"cat": 800, "dog": 200}), None, None, HOLD)
    assert lines == [
        "label distribution: class 'cat' 50.0% -> 80.0% of the records (L-infinity distance 0.300, more than "
        "hold.label_linf 0.1)"
    ]


def test_columns_that_disappeared_or_changed_type_are_held():
    before = manifest({"a": 100}, features={"x": "float32", "y": "int64", "z": "string"})
    after = manifest({"a": 100}, features={"x": "float32", "y": "string"})
    assert held_checks(before, after, None, None, HOLD) == [
        "column 'y': int64 -> string (its type changed)",
        "column 'z': string -> none (it disappeared)",
    ]


def test_a_number_column_whose_distribution_moved_is_held_and_one_that_did_not_is_not():
    before = statistics(0, 5000, 1)
    moved = held_checks(manifest({"a": 5000}), manifest({"a": 5000}), before, statistics(2, 5000, 2), HOLD)
    assert len(moved) == 1 and moved[0].startswith("column 'x' in train: median ") and "Jensen-Shannon" in moved[0]
    assert held_checks(manifest({"a": 5000}), manifest({"a": 5000}), before, statistics(0, 5000, 3), HOLD) == []


@given(was=st.integers(0, 1000), now=st.integers(0, 1000))
def test_errors_are_held_when_several_times_the_previous_fraction(was, now):
    before, after = manifest({"a": 10_000}, errors=was), manifest({"a": 10_000}, errors=now)
    lines = [line for line in held_checks(before, after, None, None, HOLD) if line.startswith("error fraction")]
    fraction = now / (10_000 + now)
    assert bool(lines) == (fraction >= HOLD.min_error_fraction and fraction > HOLD.error_growth * was / (10_000 + was))


def test_holding_can_be_turned_off():
    off = HoldConfig(enabled=False)
    assert held_checks(manifest({"cat": 500}), manifest({"dog": 5}), None, None, off) == []


@settings(max_examples=30, deadline=None)
@given(records=st.integers(20, 999), moved=st.floats(0.15, 0.5), seed=st.integers(0, 2**32 - 1))
def test_distributions_of_fewer_records_than_min_records_are_not_compared(records, moved, seed):
    """A few sources added to a small dataset move a class's share past any bound: below
    hold.min_records only what no sample size excuses holds (records, classes, columns, errors)."""
    half = records // 2
    shifted = round(records * moved)
    before, after = (
        manifest({"cat": half, "dog": records - half}),
        manifest({"cat": half + shifted, "dog": records - half - shifted}),
    )
    numbers = statistics(0, records, seed), statistics(3, records, seed + 1)
    assert [line for line in held_checks(before, after, *numbers, HOLD) if not line.startswith("records")] == []
    compared = held_checks(before, after, *numbers, HoldConfig(min_records=0))
    assert any(line.startswith("label distribution") for line in compared), compared
