"""Writing records to `<output>/<split>-SSSSS-of-NNNNN.tfrecord[.gz]`, and dead letters and groups of
copies to JSON lines (names: pipeline.contract.layout)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.contract.layout import (
    COPIES_PREFIX,
    ERROR_FILES,
    ERRORS_PREFIX,
    GZIP,
    ShardedFileTemplate,
    join,
    record_files,
)
from transforms import stopping
from transforms.gzip_codec import use_gzip_codec
from transforms.once import OnceWithAll
from transforms.outcomes import DeadLetter
from transforms.same_content import SameContent

use_gzip_codec()  # for every job that writes records (on remote workers: GzipCodecPlugin)


class PayloadsBySplit(beam.DoFn):
    """Record -> its payload, on the output tagged with its split: one step per record where a
    Partition and a Map would take two. A split the plan does not name fails the bundle (an
    undeclared tag could otherwise drop the record)."""

    def __init__(self, names: list[str]):
        self._names = frozenset(names)

    def process(self, record):
        stopping.check()
        if record.split not in self._names:
            raise ValueError(f"record of split {record.split!r}, which the plan does not name ({sorted(self._names)})")
        yield beam.pvalue.TaggedOutput(record.split, record.data)


@beam.ptransform_fn
def WriteSplits(records, output: str, shards: dict[str, int], compression: str = GZIP):
    """One WriteToTFRecord per split, with that split's planned shard count, GZIP or uncompressed
    (`compression` as a manifest says it). Returns {split: PCollection of the written file names}."""
    names = list(shards)
    suffix = record_files(compression).suffix
    codec = CompressionTypes.GZIP if compression == GZIP else CompressionTypes.UNCOMPRESSED
    payloads = records | "PayloadsBySplit" >> beam.ParDo(PayloadsBySplit(names)).with_outputs(*names)
    return {
        name: payloads[name]
        | f"{name}.Write"
        >> beam.io.WriteToTFRecord(
            join(output, name),
            file_name_suffix=suffix,
            num_shards=shards[name],
            shard_name_template=ShardedFileTemplate.BEAM_SHARD_TEMPLATE,
            compression_type=codec,
        )
        for name in names
    }


def write_json_lines(items: Iterable[DeadLetter | SameContent], path: str) -> list[str]:
    """Writes each item's to_json() as a line of a new file at `path` (written whole again on a
    retry); returns [path]."""
    stopping.check()
    with FileSystems.create(path, mime_type="text/plain", compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for item in items:
            stopping.check()
            f.write(item.to_json().encode() + b"\n")
    return [path]


def write_copies(groups: Iterable[SameContent], path: str) -> list[str]:
    """write_json_lines when there is a group; else nothing, and no file."""
    groups = iter(groups)
    first = next(groups, None)
    return [] if first is None else write_json_lines(itertools.chain([first], groups), path)


@beam.ptransform_fn
def WriteDeadLetters(dead_letters, output: str):
    """All dead letters in one JSON-lines file (written even when empty, so its absence means a
    failed run). Returns the written file names."""
    path = join(output, ERROR_FILES.name(ERRORS_PREFIX, 0, 1))
    return dead_letters | "Write" >> OnceWithAll(write_json_lines, path)


@beam.ptransform_fn
def WriteCopies(groups, output: str):
    """Every group of sources with the same bytes (transforms.same_content) in one JSON-lines file,
    only when there is one. Returns the written file names."""
    path = join(output, ERROR_FILES.name(COPIES_PREFIX, 0, 1))
    return groups | "Write" >> OnceWithAll(write_copies, path)
