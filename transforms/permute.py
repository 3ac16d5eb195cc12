"""A shuffle that really permutes element order, on every runner.

Beam's Reshuffle redistributes elements but does not reorder them on the DirectRunner (a
class-sorted listing comes out class-sorted). Here every element gets a random bucket; each bucket's
elements are shuffled in memory, so the output order is random whatever order the runner emits
groups in. Apply it to small elements (paths, rows), before anything heavy is read.
"""

from __future__ import annotations

import random

import apache_beam as beam


class _ShuffleBucket(beam.DoFn):
    def setup(self):
        self._random = random.Random()  # seeded from os.urandom: a fresh order every run

    def process(self, keyed_group):
        _, values = keyed_group
        values = list(values)
        self._random.shuffle(values)
        yield from values


@beam.ptransform_fn
def PermuteOrder(pcoll, num_buckets: int):
    """`num_buckets` bounds the elements one worker shuffles in memory (~count / num_buckets)."""
    if num_buckets < 1:
        raise ValueError("num_buckets must be >= 1")
    return (
        pcoll
        | "KeyByRandomBucket" >> beam.Map(lambda x: (random.randrange(num_buckets), x))
        | "GroupBuckets" >> beam.GroupByKey()
        | "ShuffleWithinBuckets" >> beam.ParDo(_ShuffleBucket())
    )
