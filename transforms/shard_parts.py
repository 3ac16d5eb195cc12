"""Shard parts: a run's records written into files of their own, then given their shards' names.

Every writer of records writes parts: each bundle attempt writes its records for a shard into a
part under a name only it uses (in the run's folder: `.shard-parts/`), through core.storage
(Beam's GZIP codec, local and gs:// paths), and reports the parts it finished. FinalizeShards then
gives each planned shard its parts' bytes under the shard's name (renamed when one part holds it,
joined in order when several do: GZIP members and TFRecord frames both concatenate), creates an
empty shard where no record went, and removes the parts folder. A failed attempt never reports its
parts, so its records reach no shard, and a retried step writes new parts: every step may be
repeated.

On the lean local runner the step that makes the records writes them as it goes (that runner runs
a step's whole bundle before any step downstream sees its output, so grouping records by shard
first would hold every record in memory: README, Performance): each bundle attempt writes one
part per planned shard, round robin from a random shard. Elsewhere records are grouped by shard
and each group written as one part (transforms.write.WriteSplits).

ArrayRecord files (format: array_record) do not join: their parts are written uncompressed (the
same TFRecord framing as any part), and each shard's parts are transcoded into its one ArrayRecord
file (core.array_record_files), shard by shard wherever the runner puts them, then removed.

Local parts are shared (SharedParts): whichever thread or converting process makes a record
appends it to the part it was given as one self-contained piece of the part's GZIP member
(transforms.part_appender), and the bundle's process ends each member once every record is in.
The bundle's thread writes the rest through Beam's GZIP codec (BundleShards): gs:// parts, and
records worth deflating, one stream per shard.

"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import shutil
import uuid
from collections.abc import Iterable
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes

from core import array_record_files, storage
from core.contract.layout import ARRAY_RECORD, GZIP, SHARD_PARTS_FOLDER, TFRECORD, is_remote, join, record_files
from core.evidence import OwnFolder
from core.tfrecord_framing import framed, unframed
from transforms import progress, stopping
from transforms.gzip_codec import use_gzip_codec
from transforms.gzip_pieces import HEADER, Piece, PieceLedger, closing
from transforms.once import OnceWithAll
from transforms.outcomes import Written

use_gzip_codec()

SHARD_PARTS = "shard_parts"  # the tag of the output that reports a bundle's ShardParts


class ShardPart(NamedTuple):
    """One bundle attempt's records for one shard, in the file at `path`."""

    split: str
    index: int
    path: str
    records: int


@dataclasses.dataclass(frozen=True)
class ShardLayout:
    """Where a run's shards go: `folder`, each split's planned shard count, the compression (GZIP or
    NONE) and file format (tfrecord or array_record, whose parts are uncompressed), as a manifest
    says them."""

    folder: str
    shards: dict[str, int]
    compression: str
    file_format: str = TFRECORD

    @property
    def parts_folder(self) -> str:
        return join(self.folder, SHARD_PARTS_FOLDER)

    @property
    def local(self) -> bool:
        return not is_remote(self.folder)

    def shard_path(self, split: str, index: int) -> str:
        return join(
            self.folder, record_files(self.compression, self.file_format).name(split, index, self.shards[split])
        )

    def part_path(self, split: str, index: int, attempt: str) -> str:
        return join(self.parts_folder, f"{split}-{index:05d}-{attempt}")

    def create(self, path: str):
        codec = CompressionTypes.GZIP if self.compression == GZIP else CompressionTypes.UNCOMPRESSED
        return storage.create(path, codec)

    def make_parts_folder(self) -> None:
        storage.make_folder(self.parts_folder, exist_ok=True)


class RoundRobin:
    """Which shard of its split each record goes to: the next one, from a random first shard, as
    Beam's file sinks spread records. Splits the layout does not name raise."""

    def __init__(self, layout: ShardLayout):
        self._shards = layout.shards
        self._next = {split: random.randrange(total) for split, total in layout.shards.items()}

    def next(self, split: str) -> int:
        if split not in self._next:
            raise ValueError(f"record of split {split!r}, which the plan does not name ({sorted(self._next)})")
        index = self._next[split]
        self._next[split] = (index + 1) % self._shards[split]
        return index


class _OpenPart:
    def __init__(self, file, path: str):
        self.file, self.path, self.records = file, path, 0


class BundleShards:
    """One bundle attempt's open parts, written by the bundle's thread through Beam's file systems
    (gs:// parts): `write` frames a record into the next part of its split, `close` finishes them
    and says what each holds."""

    def __init__(self, layout: ShardLayout):
        self._layout = layout
        self._attempt = uuid.uuid4().hex
        self._order = RoundRobin(layout)
        self._open: dict[tuple[str, int], _OpenPart] = {}

    def write(self, split: str, payload: bytes) -> None:
        index = self._order.next(split)
        part = self._open.get((split, index))
        if part is None:
            self._layout.make_parts_folder()
            path = self._layout.part_path(split, index, self._attempt)
            part = self._open[(split, index)] = _OpenPart(self._layout.create(path), path)
        for piece in framed(payload):
            part.file.write(piece)
        part.records += 1

    def close(self) -> list[ShardPart]:
        parts = []
        for (split, index), part in sorted(self._open.items()):
            part.file.close()
            parts.append(ShardPart(split, index, part.path, part.records))
        self._open = {}
        return parts


class SharedParts:
    """One bundle attempt's local parts, which any thread or converting process appends records to
    (transforms.part_appender): `assign` names the part of a record of `split` (RoundRobin),
    creating it; `add` takes what a record's append reported; `close` checks that the reported
    pieces cover each part exactly, ends its GZIP member and says what each holds."""

    def __init__(self, layout: ShardLayout):
        self._layout = layout
        self._attempt = uuid.uuid4().hex
        self._order = RoundRobin(layout)
        self._paths: dict[tuple[str, int], str] = {}
        self._ledgers: dict[str, tuple[str, int, PieceLedger]] = {}
        self._header = HEADER if layout.compression == GZIP else b""

    def assign(self, split: str) -> str:
        index = self._order.next(split)
        path = self._paths.get((split, index))
        if path is None:
            path = self._paths[(split, index)] = self._layout.part_path(split, index, self._attempt)
            self._layout.make_parts_folder()
            with open(path, "xb") as f:  # a new name of this attempt's (O_EXCL: never through a link)
                f.write(self._header)
            self._ledgers[path] = (split, index, PieceLedger(path, len(self._header)))
        return path

    def add(self, written: Written) -> None:
        self._ledgers[written.part][2].add(Piece(*written.piece))

    def close(self) -> list[ShardPart]:
        """The parts that hold records (one whose records were all handed back is removed)."""
        parts = []
        for path, (split, index, ledger) in sorted(self._ledgers.items()):
            ledger.check_complete(os.path.getsize(path))
            if not ledger.pieces:
                storage.delete([path], OwnFolder(self._layout.parts_folder))
                continue
            if self._header:
                with open(path, "ab") as f:
                    f.write(closing(ledger.crc, ledger.size))
            parts.append(ShardPart(split, index, path, ledger.pieces))
        self._ledgers, self._paths = {}, {}
        return parts


def finalize_shard(layout: ShardLayout, split: str, index: int, part_paths: list[str]) -> str:
    """Puts the bytes of the shard's parts (if any, in order) under the shard's name; returns its
    path. Repeated (a retried step) after its parts were moved, it leaves the shard as it is."""
    path = layout.shard_path(split, index)
    if part_paths and not any(storage.exists(part) for part in part_paths) and storage.exists(path):
        return path
    if not part_paths:
        layout.create(path).close()  # a valid empty shard
    elif len(part_paths) == 1:
        storage.rename(part_paths[0], path)
    else:
        with storage.create(path) as out:
            for part in part_paths:
                with storage.open_binary(part, inside=layout.parts_folder) as f:
                    shutil.copyfileobj(f, out, 1 << 20)
    return path


def _finalize_all(parts: Iterable[ShardPart], layout: ShardLayout, writing: progress.Phase):
    by_shard = collections.defaultdict(list)
    for part in sorted(parts, key=lambda part: part.path):
        by_shard[(part.split, part.index)].append(part.path)
    for split, total in layout.shards.items():
        for index in range(total):
            stopping.check()
            path = finalize_shard(layout, split, index, by_shard[(split, index)])
            writing.add()
            yield path
    storage.delete([layout.parts_folder], OwnFolder(layout.parts_folder))  # with any part of a failed attempt


@beam.ptransform_fn
def FinalizeShards(parts, layout: ShardLayout):
    """`parts`: the ShardParts every successful bundle reported. Returns the PCollection of the
    planned shards' paths, complete, once the parts folder is gone. The parts come in on the main
    input: on the lean runner a side input of them can come out empty (as one of a write's output
    does, pipeline.readback). Each shard finalized counts into the run's `writing` phase
    (transforms.progress)."""
    writing = progress.Phase("writing", "shards", sum(layout.shards.values()))
    if layout.file_format == ARRAY_RECORD:
        return parts | "ToArrayRecord" >> _TranscodeShards(layout, writing)
    return parts | "FromParts" >> OnceWithAll(_finalize_all, layout, writing)


def transcode_shard(layout: ShardLayout, split: str, index: int, part_paths: list[str]) -> str:
    """Writes the records of the shard's (uncompressed) parts, in order, as its ArrayRecord file
    (an empty one without parts); returns its path. The parts stay until every shard is written
    (_TranscodeShards removes their folder), so a repeated step (a retry) writes the same file
    again from the same parts."""
    path = layout.shard_path(split, index)
    array_record_files.write_shard(path, _part_records(part_paths, layout.parts_folder))
    return path


def _part_records(part_paths: list[str], folder: str):
    for part in part_paths:
        with storage.open_binary(part, inside=folder) as f:
            try:
                yield from unframed(f.read)
            except ValueError as e:
                raise OSError(f"shard part {part}: {e}") from e


class _Transcode(beam.DoFn):
    """((split, index), part paths, with a None for every shard) -> the shard's path (transcode_shard)."""

    def __init__(self, layout: ShardLayout, writing: progress.Phase):
        self._layout, self._writing = layout, writing

    def process(self, shard_parts):
        (split, index), paths = shard_parts
        stopping.check()
        path = transcode_shard(self._layout, split, index, sorted(p for p in paths if p is not None))
        self._writing.add()
        yield path


def _without_parts_folder(paths, layout: ShardLayout):
    paths = list(paths)
    storage.delete([layout.parts_folder], OwnFolder(layout.parts_folder))  # with any part of a failed attempt
    return paths


@beam.ptransform_fn
def _TranscodeShards(parts, layout: ShardLayout, writing: progress.Phase):
    """FinalizeShards for ArrayRecord files: the part paths grouped by shard, with every planned
    shard's key (so a shard without parts becomes an empty file), each group transcoded where
    the runner puts it, and the parts folder removed once every shard is written."""
    planned = [((split, index), None) for split, total in layout.shards.items() for index in range(total)]
    every_shard = parts.pipeline | "Start" >> beam.Impulse() | "PlannedShards" >> beam.FlatMap(lambda _: planned)
    return (
        (parts | "ByShard" >> beam.Map(lambda part: ((part.split, part.index), part.path)), every_shard)
        | "WithPlanned" >> beam.Flatten()
        | "GroupByShard" >> beam.GroupByKey()
        | "Transcode" >> beam.ParDo(_Transcode(layout, writing))
        | "RemoveParts" >> OnceWithAll(_without_parts_folder, layout)
    )
