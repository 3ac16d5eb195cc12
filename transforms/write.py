"""Writing records to `<folder>/<split>-SSSSS-of-NNNNN.tfrecord[.gz]` (or `.array_record`), and dead letters and groups
of copies to JSON lines (names: core.contract.layout), through core.storage only: Beam's
file sinks read their output's path as a glob pattern (and delete what it matches), so none is
used."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable

import apache_beam as beam

from core import storage
from core.contract.layout import (
    COPIES_PREFIX,
    ERROR_FILES,
    ERRORS_PREFIX,
    GZIP,
    TFRECORD,
    join,
)
from core.tfrecord_framing import framed
from transforms import progress, stopping
from transforms.gzip_codec import use_gzip_codec
from transforms.once import OnceWithAll
from transforms.outcomes import DeadLetter
from transforms.same_content import SameContent
from transforms.shard_parts import FinalizeShards, RoundRobin, ShardLayout, ShardPart

use_gzip_codec()  # for every job that writes records (on remote workers: GzipCodecPlugin)


class ToShards(beam.DoFn):
    """Record -> ((split, shard index), payload): each bundle spreads its records round robin
    over its split's shards from a random one (RoundRobin, which refuses a split the plan does
    not name)."""

    def __init__(self, layout: ShardLayout):
        self._layout = layout

    def start_bundle(self):
        self._order = RoundRobin(self._layout)

    def process(self, record):
        stopping.check()
        yield (record.split, self._order.next(record.split)), record.data


class WriteShardPart(beam.DoFn):
    """((split, index), payloads) -> the ShardPart holding them, written under a name of this
    attempt's own (a retry writes another; FinalizeShards takes the one reported). Each record
    counts into the `writing records` phase (transforms.progress)."""

    def __init__(self, layout: ShardLayout):
        self._layout = layout
        self._writing = progress.Phase("writing records", "records")

    def process(self, shard_payloads):
        (split, index), payloads = shard_payloads
        self._layout.make_parts_folder()
        path = self._layout.part_path(split, index, uuid.uuid4().hex)
        records = 0
        with self._layout.create(path) as f:
            for payload in progress.counted(payloads, self._writing):
                stopping.check()
                for piece in framed(payload):
                    f.write(piece)
                records += 1
        yield ShardPart(split, index, path, records)


@beam.ptransform_fn
def WriteSplits(records, folder: str, shards: dict[str, int], compression: str = GZIP, file_format: str = TFRECORD):
    """Each split's records into its planned number of shards, GZIP or uncompressed TFRecords or
    ArrayRecords (`compression` and `file_format` as a manifest says them): grouped by shard, each
    group written as one part, the parts then made their shards (transforms.shard_parts). Returns
    the PCollection of the written shards' paths."""
    layout = ShardLayout(folder, shards, compression, file_format)
    return (
        records
        | "ToShards" >> beam.ParDo(ToShards(layout))
        | "GroupByShard" >> beam.GroupByKey()
        | "WriteParts" >> beam.ParDo(WriteShardPart(layout))
        | "FinalizeShards" >> FinalizeShards(layout)
    )


def write_json_lines(items: Iterable[DeadLetter | SameContent], path: str) -> list[str]:
    """Writes each item's to_json() as a line of a new file at `path` (written whole again on a
    retry); returns [path]."""
    stopping.check()
    with storage.create(path, mime_type="text/plain") as f:
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
