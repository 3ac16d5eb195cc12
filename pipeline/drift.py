"""How far one distribution moved from another, measured as TFDV's drift comparators measure it, so
that a threshold a user knows from TFDV means the same here: the L-infinity distance between two
categorical distributions (the largest change in any value's share), and the approximate
Jensen-Shannon divergence between two histograms of a number (base 2, so 0 to 1), after both are
cut at the union of their bucket edges, each bucket's count spread evenly over its width. NaNs are
a bucket of their own, so that a column turning NaN drifts (TFDV 1.16 drops them from histograms
whose edges differ). tests/pipeline/test_drift.py compares both with TFDV's own on generated
statistics."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import statistics_pb2


def linf_distance(before: Mapping[str, float], after: Mapping[str, float]) -> tuple[str, float]:
    """(the value whose share changed most, by how much): each side's counts as shares of its
    own total. ("", 0.0) when either side is empty."""
    total_before, total_after = sum(before.values()), sum(after.values())
    if not total_before or not total_after:
        return "", 0.0
    changes = {
        value: abs(after.get(value, 0) / total_after - before.get(value, 0) / total_before)
        for value in before.keys() | after.keys()
    }
    value = max(sorted(changes), key=changes.__getitem__)
    return value, changes[value]


def js_divergence(before: statistics_pb2.Histogram, after: statistics_pb2.Histogram) -> float | None:
    """The approximate Jensen-Shannon divergence of two histograms of one number; None when either
    holds no values."""
    p, q = _aligned(before, after)
    if not sum(p) or not sum(q):
        return None
    p, q = [x / sum(p) for x in p], [x / sum(q) for x in q]
    m = [(a + b) / 2 for a, b in zip(p, q, strict=True)]
    return min(1.0, (_kl(p, m) + _kl(q, m)) / 2)


def _kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log2(a / b) for a, b in zip(p, q, strict=True) if a > 0 and b > 0)


def _aligned(before: statistics_pb2.Histogram, after: statistics_pb2.Histogram) -> tuple[list[float], list[float]]:
    """Both histograms' counts in the same buckets: those of width cut at the union of both
    histograms' edges, then one per point mass (a bucket of no width), then one of NaNs."""
    ranges = [[b for b in h.buckets if b.low_value < b.high_value] for h in (before, after)]
    points = [{} for _ in (before, after)]
    for h, found in zip((before, after), points, strict=True):
        for b in h.buckets:
            if b.low_value == b.high_value:
                found[b.low_value] = found.get(b.low_value, 0.0) + b.sample_count
    edges = sorted({edge for buckets in ranges for b in buckets for edge in (b.low_value, b.high_value)})
    aligned = [_cut(buckets, edges) for buckets in ranges]
    for counts, found in zip(aligned, points, strict=True):
        counts += [found.get(point, 0.0) for point in sorted(points[0].keys() | points[1].keys())]
    if before.num_nan or after.num_nan:
        aligned[0].append(float(before.num_nan))
        aligned[1].append(float(after.num_nan))
    return aligned[0], aligned[1]


def _cut(buckets, edges: list[float]) -> list[float]:
    """The counts of `buckets` in the buckets between consecutive `edges`, each bucket's count
    spread evenly over its width."""
    counts = [0.0] * max(len(edges) - 1, 0)
    for b in buckets:
        first, last = bisect.bisect_left(edges, b.low_value), bisect.bisect_left(edges, b.high_value)
        for i in range(first, last):
            counts[i] += b.sample_count * (edges[i + 1] - edges[i]) / (b.high_value - b.low_value)
    return counts
