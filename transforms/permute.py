"""A shuffle that really permutes element order, on every runner.

Beam's Reshuffle redistributes elements but does not reorder them on the DirectRunner (a
class-sorted listing comes out class-sorted). Here every element gets a random bucket; each bucket's
elements are shuffled in memory, so the output order is random whatever order the runner emits
groups in. Apply it to small elements (paths, rows), before anything heavy is read.

Elements travel to their buckets in lists (up to LIST_SIZE per bucket and bundle), so the shuffle
moves a fraction of the elements: a runner's work per element there (the lean local runner's
window bookkeeping of a GroupByKey, a shuffle service's per-record costs) is paid per list.
"""

from __future__ import annotations

import random

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

LIST_SIZE = 64  # elements per list sent to a bucket; a bundle holds up to num_buckets of them


class _ToRandomBuckets(beam.DoFn):
    """Element (or, with `lists`, each element of a list) -> (random bucket, list of elements),
    each list sent when full or at the bundle's end."""

    def __init__(self, num_buckets: int, lists: bool):
        self._num_buckets, self._lists = num_buckets, lists

    def setup(self):
        self._random = random.Random()  # seeded from os.urandom: a fresh order every run

    def start_bundle(self):
        self._buckets: dict[int, list] = {}

    def process(self, element):
        for one in element if self._lists else (element,):
            bucket = self._random.randrange(self._num_buckets)
            elements = self._buckets.setdefault(bucket, [])
            elements.append(one)
            if len(elements) == LIST_SIZE:
                del self._buckets[bucket]
                yield bucket, elements

    def finish_bundle(self):
        for bucket, elements in self._buckets.items():
            yield GlobalWindows.windowed_value((bucket, elements))


class _ShuffleBucket(beam.DoFn):
    def __init__(self, batch_size: int | None):
        self._batch_size = batch_size

    def setup(self):
        self._random = random.Random()  # seeded from os.urandom: a fresh order every run

    def process(self, keyed_group):
        _, lists = keyed_group
        values = [element for elements in lists for element in elements]
        self._random.shuffle(values)
        if self._batch_size is None:
            yield from values
        else:
            for start in range(0, len(values), self._batch_size):
                yield values[start : start + self._batch_size]


@beam.ptransform_fn
def PermuteOrder(pcoll, num_buckets: int, batch_size: int | None = None, lists: bool = False):
    """`num_buckets` bounds the elements one worker shuffles in memory (~count / num_buckets).
    With `batch_size`, the permuted elements come out in lists of up to that many (each bucket's
    last one shorter): batching there costs the runner no step per element, as BatchElements
    after it would. With `lists`, `pcoll` holds lists of the elements to permute (a listing's,
    transforms.sources.in_lists)."""
    if num_buckets < 1:
        raise ValueError("num_buckets must be >= 1")
    if batch_size is not None and batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    return (
        pcoll
        | "ToRandomBuckets" >> beam.ParDo(_ToRandomBuckets(num_buckets, lists))
        | "GroupBuckets" >> beam.GroupByKey()
        | "ShuffleWithinBuckets" >> beam.ParDo(_ShuffleBucket(batch_size))
    )
