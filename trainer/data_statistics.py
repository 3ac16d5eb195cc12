"""What the training split holds, read once before a fresh model is built: the mean and variance
of each number column, which the tabular model standardises its inputs with (model.Standardization:
learned from the data before training, not from batches as it trains), and the smallest and
largest label, checked against the classes before a step is trained.

Read in evaluation order (the shards round robin, deterministic), up to MAX_RECORDS records: the
pipeline writes records in random order, so such a prefix is a random sample, and every host of a
TPU pod reads the same one and computes the same statistics. Summed in float64 a batch at a time
(Chan, Golub and LeVeque's pairwise update), so that a column of large values with a small spread
(timestamps, ids) keeps its variance, which sums of squares would cancel away.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from core.contract.manifest import Manifest
from trainer import input_fn, manifest_io
from trainer.errors import ShardLengthError

MAX_RECORDS = 1_000_000  # a few seconds of reading; more moves no mean or variance that matters
READ_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class ColumnStatistics:
    """The statistics of `columns` (and of `label`, when one was asked for) over `records` records."""

    columns: tuple[str, ...]
    records: int
    complete: bool  # every record of the split was read (else the first MAX_RECORDS)
    mean: tuple[float, ...]
    variance: tuple[float, ...]  # population variance, as the model divides by its square root
    label_min: int | None = None
    label_max: int | None = None


def column_statistics(
    data: str,
    manifest: Manifest,
    split: str,
    columns: Sequence[str],
    label: str | None = None,
    max_records: int = MAX_RECORDS,
) -> ColumnStatistics:
    """Mean and variance of each of `columns` (numbers; missing values count as the default the
    input pipeline gives them, as the model sees them), and the range of the int64 `label`."""
    columns = tuple(columns)
    spec = input_fn.tabular_parse_spec(manifest, [*columns, *([label] if label else [])])
    info = manifest_io.split_info(manifest, split)
    records = input_fn.record_dataset(
        manifest_io.shard_paths(data, manifest, split),
        training=False,
        lengths=info.shard_lengths,
        compression_type=manifest.tf_compression_type,
    )

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        values = [tf.cast(parsed[name], tf.float64) for name in columns]
        stacked = tf.stack(values, axis=1) if values else tf.zeros([tf.size(serialized), 0], tf.float64)
        return stacked, parsed[label] if label else tf.zeros([tf.size(serialized)], tf.int64)

    dataset = records.take(max_records).batch(READ_BATCH).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    count, mean, m2 = 0, np.zeros(len(columns)), np.zeros(len(columns))
    low = high = None
    try:
        for values, labels in dataset.as_numpy_iterator():
            n = len(values)
            batch_mean = values.mean(axis=0)
            batch_m2 = ((values - batch_mean) ** 2).sum(axis=0)
            delta = batch_mean - mean
            total = count + n
            mean = mean + delta * n / total
            m2 = m2 + batch_m2 + delta**2 * count * n / total
            count = total
            if label and n:
                low = int(labels.min()) if low is None else min(low, int(labels.min()))
                high = int(labels.max()) if high is None else max(high, int(labels.max()))
    except tf.errors.OpError as e:  # a shard's count check (input_fn.read_shard)
        damaged = ShardLengthError.from_op_error(e)
        if damaged is None:
            raise
        raise damaged from e
    variance = m2 / count if count else m2
    return ColumnStatistics(
        columns,
        count,
        count >= info.records,
        tuple(float(v) for v in mean),
        tuple(float(v) for v in variance),
        low,
        high,
    )
