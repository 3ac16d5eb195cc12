"""Writing records to `<output>/<split>-SSSSS-of-NNNNN.tfrecord[.gz]` and dead letters to JSON lines
(names: pipeline.contract.layout)."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes

from pipeline.contract.layout import ERROR_FILES, ERRORS_PREFIX, GZIP, ShardedFileTemplate, join, record_files
from transforms.gzip_codec import use_gzip_codec

use_gzip_codec()  # for every job that writes records (on remote workers: GzipCodecPlugin)


@beam.ptransform_fn
def WriteSplits(records, output: str, shards: dict[str, int], compression: str = GZIP):
    """One WriteToTFRecord per split, with that split's planned shard count, GZIP or uncompressed
    (`compression` as a manifest says it). Returns {split: PCollection of the written file names}."""
    names = list(shards)
    suffix = record_files(compression).suffix
    codec = CompressionTypes.GZIP if compression == GZIP else CompressionTypes.UNCOMPRESSED
    parts = records | "BySplit" >> beam.Partition(lambda record, _: names.index(record.split), len(names))
    return {
        name: (
            part
            | f"{name}.Payload" >> beam.Map(lambda record: record.data)
            | f"{name}.Write"
            >> beam.io.WriteToTFRecord(
                join(output, name),
                file_name_suffix=suffix,
                num_shards=shards[name],
                shard_name_template=ShardedFileTemplate.BEAM_SHARD_TEMPLATE,
                compression_type=codec,
            )
        )
        for name, part in zip(names, parts, strict=True)
    }


@beam.ptransform_fn
def WriteDeadLetters(dead_letters, output: str):
    """All dead letters in one JSON-lines file (written even when empty, so its absence means a
    failed run). Returns the written file names."""
    return (
        dead_letters
        | "ToJson" >> beam.Map(lambda letter: letter.to_json())
        | "Write"
        >> beam.io.WriteToText(
            join(output, ERRORS_PREFIX),
            file_name_suffix=ERROR_FILES.suffix,
            num_shards=1,
            shard_name_template=ShardedFileTemplate.BEAM_SHARD_TEMPLATE,
        )
    )
