"""Whether a refresh's new version drifted so far from the version LATEST names that a person must
look before readers follow it: a scheduled refresh runs with nobody watching, and a bucket an
upstream job half emptied, a class folder renamed or a column written as text would otherwise
become every trainer's data. Each check that fails is one line, `what: before -> after (why)`.

Pure: it compares two manifests and their statistics (transforms.dataset_statistics), as
pipeline.drift measures distributions, against the thresholds of the `hold` settings."""

from __future__ import annotations

from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import statistics_pb2

from core.contract.manifest import Manifest
from pipeline.config import HoldConfig
from pipeline.drift import js_divergence, linf_distance


def held_checks(
    before: Manifest,
    after: Manifest,
    before_statistics: statistics_pb2.DatasetFeatureStatisticsList | None,
    after_statistics: statistics_pb2.DatasetFeatureStatisticsList,
    hold: HoldConfig,
) -> list[str]:
    """The checks the new version (`after`) fails against the previous one (`before`), a line
    each; [] when it may be published. A previous version without statistics (written before
    they were) is compared by its manifest only."""
    if not hold.enabled:
        return []
    lines = _records(before, after, hold) + _classes(before, after) + _columns(before, after)
    lines += _errors(before, after, hold)
    if min(before.counts.written, after.counts.written) < hold.min_records:
        return lines
    lines += _labels(before, after, hold)
    if before_statistics is not None and after.kind == "csv":  # an image's sizes are no column of the data
        lines += _numbers(before_statistics, after_statistics, hold)
    return lines


def _records(before: Manifest, after: Manifest, hold: HoldConfig) -> list[str]:
    was, now = before.counts.written, after.counts.written
    drop = (was - now) / was if was else 0.0
    if drop <= hold.records_drop:
        return []
    return [f"records: {was:,} -> {now:,} (down {drop:.0%}, more than hold.records_drop {hold.records_drop:.0%})"]


def _label_totals(manifest: Manifest) -> dict[str, int]:
    totals: dict[str, int] = {}
    for split in manifest.splits.values():
        for label, n in split.label_counts.items():
            totals[label] = totals.get(label, 0) + n
    return totals


def _classes(before: Manifest, after: Manifest) -> list[str]:
    was, now = _label_totals(before), _label_totals(after)
    return [
        f"class {label!r}: {n:,} records -> none (it disappeared)"
        for label, n in sorted(was.items())
        if label not in now
    ]


def _labels(before: Manifest, after: Manifest, hold: HoldConfig) -> list[str]:
    was, now = _label_totals(before), _label_totals(after)
    value, distance = linf_distance(was, now)
    if distance <= hold.label_linf:
        return []
    return [
        f"label distribution: class {value!r} {_share(was, value):.1%} -> {_share(now, value):.1%} of the records "
        f"(L-infinity distance {distance:.3f}, more than hold.label_linf {hold.label_linf})"
    ]


def _share(counts: Mapping[str, int], value: str) -> float:
    return counts.get(value, 0) / sum(counts.values())


def _columns(before: Manifest, after: Manifest) -> list[str]:
    lines = []
    for name, feature in sorted(before.features.items()):
        found = after.features.get(name)
        if found is None:
            lines.append(f"column {name!r}: {feature.dtype} -> none (it disappeared)")
        elif found.dtype != feature.dtype:
            lines.append(f"column {name!r}: {feature.dtype} -> {found.dtype} (its type changed)")
    return lines


def _errors(before: Manifest, after: Manifest, hold: HoldConfig) -> list[str]:
    was, now = before.error_fraction, after.error_fraction
    if now < hold.min_error_fraction or now <= was * hold.error_growth:
        return []
    return [
        f"error fraction: {was:.2%} -> {now:.2%} of the sources (more than hold.error_growth "
        f"{hold.error_growth:g} times the previous)"
    ]


def _numbers(
    before: statistics_pb2.DatasetFeatureStatisticsList,
    after: statistics_pb2.DatasetFeatureStatisticsList,
    hold: HoldConfig,
) -> list[str]:
    lines = []
    was, now = _number_columns(before), _number_columns(after)
    for key in sorted(was.keys() & now.keys()):
        a, b = was[key], now[key]
        divergence = js_divergence(_standard(a), _standard(b))
        if divergence is not None and divergence > hold.numeric_js:
            split, name = key
            lines.append(
                f"column {name!r} in {split}: median {a.median:g} -> {b.median:g}, mean {a.mean:g} -> {b.mean:g} "
                f"(Jensen-Shannon divergence {divergence:.3f}, more than hold.numeric_js {hold.numeric_js})"
            )
    return lines


def _number_columns(
    statistics: statistics_pb2.DatasetFeatureStatisticsList,
) -> dict[tuple[str, str], statistics_pb2.NumericStatistics]:
    """(split, column) -> the statistics of each number column."""
    return {
        (dataset.name, feature.path.step[0]): feature.num_stats
        for dataset in statistics.datasets
        for feature in dataset.features
        if feature.HasField("num_stats")
    }


def _standard(stats: statistics_pb2.NumericStatistics) -> statistics_pb2.Histogram:
    return next(h for h in stats.histograms if h.type == statistics_pb2.Histogram.STANDARD)
