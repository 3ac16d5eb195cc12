"""Writing records to `<output>/<split>-SSSSS-of-NNNNN.tfrecord.gz` and dead letters to JSON lines."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

import transforms.gzip_codec  # noqa: F401  pylint: disable=unused-import  # Beam's GZIP through ISA-L, here and on workers

SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
RECORD_SUFFIX = ".tfrecord.gz"
ERRORS_PREFIX = "errors"
ERRORS_SUFFIX = ".jsonl"


@beam.ptransform_fn
def WriteSplits(records, output: str, shards: dict[str, int]):  # pylint: disable=invalid-name
    """One GZIP WriteToTFRecord per split, with that split's planned shard count. Returns
    {split: PCollection of the written file names}."""
    names = list(shards)
    parts = records | "BySplit" >> beam.Partition(lambda record, _: names.index(record.split), len(names))
    return {
        name: (part
               | f"{name}.Payload" >> beam.Map(lambda record: record.data)
               | f"{name}.Write" >> beam.io.WriteToTFRecord(
                   FileSystems.join(output, name), file_name_suffix=RECORD_SUFFIX, num_shards=shards[name],
                   shard_name_template=SHARD_TEMPLATE, compression_type=CompressionTypes.GZIP))
        for name, part in zip(names, parts)
    }


@beam.ptransform_fn
def WriteDeadLetters(dead_letters, output: str):  # pylint: disable=invalid-name
    """All dead letters in one JSON-lines file (written even when empty, so its absence means a
    failed run). Returns the written file names."""
    return (dead_letters
            | "ToJson" >> beam.Map(lambda letter: letter.to_json())
            | "Write" >> beam.io.WriteToText(FileSystems.join(output, ERRORS_PREFIX), file_name_suffix=ERRORS_SUFFIX,
                                             num_shards=1, shard_name_template=SHARD_TEMPLATE))
