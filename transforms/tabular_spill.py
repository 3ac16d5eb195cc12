"""Tabular rows through a spill on disk, for the lean local runner: memory bounded by a bucket,
not by the input.

Every record is typed by a schema that is known only once every row has been read, and the lean
runner (BundleBasedDirectRunner) holds a step's whole output until its bundle ends: the graph the
other runners get (ReadCsvRows -> InferSchema -> PermuteRows -> EncodeRows -> WriteSplits) held
every row there, as Python objects several times the size of their text. Here the input is read
once (SpillRows): each row is tallied for the schema (InferSchema's accumulator) and appended to
one of several bucket files chosen at random, as compact frames. Once every file is read, each
bucket in turn (WriteSpilledRows) is read whole, its rows put in random order, encoded with the
schema and written into their shards (transforms.shard_parts.BundleShards). A row in a random
bucket, each bucket shuffled: every order of the rows is as likely as after PermuteOrder.

Memory holds one bucket (about BUCKET_BYTES, bucket_memory) and the open shards. A bucket larger
than that (a .csv.gz input is planned by its compressed size) is first split into smaller ones
at random. The disk holds the rows as read, uncompressed, until the shards are finalized: in the
run's shard-parts folder (removed with it, by FinalizeShards or by the launcher's clean-up of a
failed run) for a local DEST; in the system's temporary folder for a gs:// DEST, removed when
the process ends. The input is read once, so no file can change between a schema and its rows.
"""

from __future__ import annotations

import atexit
import bisect
import math
import os
import random
import shutil
import struct
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from core import storage
from transforms import progress, stopping
from transforms.counting import counter
from transforms.csv_dialect import CsvDialect
from transforms.once import OnceWithAll
from transforms.outcomes import DEAD_LETTERS, DeadLetter, OutcomeSummary
from transforms.shard_parts import SHARD_PARTS, BundleShards, FinalizeShards, ShardLayout
from transforms.tabular import ColumnType, InferSchema, ReadCsvRows, Row, encode_row

# Spilled bytes a bucket holds: what WriteSpilledRows reads into memory at once.
BUCKET_BYTES = 32 << 20
# Bucket files a step keeps open at once (one file descriptor and write buffer each); a larger
# input gets larger buckets, split again before they are read (_split).
MAX_BUCKETS = 256
_LENGTH = struct.Struct("<I")  # before each frame: a row is at most 64 Mi characters, 256 MiB of UTF-8
# Between a frame's fields: surrogateescape's stand-in for the byte 0xFF, which UTF-8 text never
# holds, nor any value of a Row (a row holding bytes that are not UTF-8 is a dead letter).
_SEPARATOR = "\udcff"
_OFFSET_BYTES = 8  # what holding a bucket costs per row besides its frame: its offset (int64)
_BATCH = 4096


def bucket_count(input_bytes: int, bucket_bytes: int = BUCKET_BYTES) -> int:
    """How many buckets SpillRows spreads `input_bytes` of CSV over: a frame holds its row's text
    and up to about 20 bytes more (length, file, line, split), which short rows can double."""
    return min(MAX_BUCKETS, max(1, math.ceil(2 * input_bytes / bucket_bytes)))


def bucket_memory(input_bytes: int) -> int:
    """What WriteSpilledRows holds of a bucket of an input of `input_bytes`: the bucket's frames (up
    to BUCKET_BYTES, bucket_count's estimate below that), and an offset for each frame of about 32
    bytes or more. A row longer than BUCKET_BYTES is held whole beyond that."""
    return min(BUCKET_BYTES, 2 * input_bytes) * (32 + _OFFSET_BYTES) // 32


class SpillFile(NamedTuple):
    """One step attempt's frames of one bucket: the file, the CSV files its frames name by index,
    how many frames and bytes it holds."""

    path: str
    sources: tuple[str, ...]
    rows: int
    size: int


class Spilled(NamedTuple):
    """What SpillRows reports per bundle: its column tallies (InferSchema's accumulator) and a
    SpillFile per bucket it wrote to, with the bucket's number."""

    tallies: list
    files: tuple[tuple[int, SpillFile], ...]


class SpilledRows(NamedTuple):
    """The schema inferred over every row, and the SpillFiles of each bucket."""

    schema: dict[str, ColumnType]
    buckets: tuple[tuple[SpillFile, ...], ...]


def spill_folder(layout: ShardLayout) -> str:
    """Where the rows wait: the run's shard-parts folder for a local DEST; for a gs:// DEST a new
    folder in the system's temporary folder, removed when this process ends (the lean runner runs
    the job in it)."""
    if layout.local:
        return layout.parts_folder
    folder = tempfile.mkdtemp(prefix="tfrecord-rows-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def frame(file_index: int, line: int, split: int, values: Sequence[str]) -> bytes:
    """A row as its bucket file holds it: length, then the fields, UTF-8."""
    data = _SEPARATOR.join((str(file_index), str(line), str(split), *values)).encode("utf-8", "surrogateescape")
    return _LENGTH.pack(len(data)) + data


def _unframe(data, offset: int, sources: tuple[str, ...], splits: tuple[str, ...]) -> Row:
    (length,) = _LENGTH.unpack_from(data, offset)
    start = offset + _LENGTH.size
    fields = str(data[start : start + length], "utf-8", "surrogateescape").split(_SEPARATOR)
    return Row(f"{sources[int(fields[0])]}:{fields[1]}", splits[int(fields[2])], tuple(fields[3:]))


class _BucketWriter:
    """One step attempt's bucket files, created as rows come: `write` appends a frame to a bucket,
    `close` reports what each file holds."""

    def __init__(self, folder: str, sources: list[str]):
        self._folder, self._sources = folder, sources
        self._attempt = uuid.uuid4().hex
        self._open: dict[int, list] = {}  # bucket -> [file, path, rows, size]

    def write(self, bucket: int, data: bytes) -> None:
        spill = self._open.get(bucket)
        if spill is None:
            path = os.path.join(self._folder, f"rows-{self._attempt}-{bucket}")
            spill = self._open[bucket] = [open(path, "xb"), path, 0, 0]  # a new name (O_EXCL: never a link)
        spill[0].write(data)
        spill[2] += 1
        spill[3] += len(data)

    def close(self) -> tuple[tuple[int, SpillFile], ...]:
        files, sources = [], tuple(self._sources)
        for bucket, (f, path, rows, size) in sorted(self._open.items()):
            f.close()
            files.append((bucket, SpillFile(path, sources, rows, size)))
        self._open = {}
        return tuple(files)


class SpillRows(ReadCsvRows):
    """A CSV file -> its rows tallied for the schema (by `infer`) and spilled into random buckets of
    `folder` (one of `buckets`); per bundle one Spilled. Dead letters and progress as ReadCsvRows."""

    def __init__(
        self,
        root: str,
        columns,
        fractions,
        delimiter: str,
        infer: InferSchema,
        folder: str,
        buckets: int,
        total_bytes: int | None = None,
        header: bool = True,
    ):
        super().__init__(root, columns, fractions, delimiter, total_bytes, header)
        self._infer = infer
        self._splits = {name: index for index, (name, _) in enumerate(fractions)}
        self._folder, self._buckets = folder, buckets

    def setup(self):
        self._random = random.Random()  # seeded from os.urandom: a fresh order every run

    def start_bundle(self):
        self._tallies, self._sources, self._writer = self._infer.create_accumulator(), [], None

    def process(self, metadata):
        if self._writer is None:
            storage.make_folder(self._folder, exist_ok=True)  # never a link planted under its name
            self._writer = _BucketWriter(self._folder, self._sources)
        self._sources.append(metadata.path)
        yield from super().process(metadata)

    def _outputs(self, row: Row, line: int):
        stopping.check()
        self._infer.add_input(self._tallies, row)
        data = frame(len(self._sources) - 1, line, self._splits[row.split], row.values)
        self._writer.write(self._random.randrange(self._buckets), data)
        return ()

    def finish_bundle(self):
        if self._writer is not None:  # an empty bundle says nothing (counting.CountRecords says why)
            yield GlobalWindows.windowed_value(Spilled(self._tallies, self._writer.close()))


def merge_spills(spills, infer: InferSchema) -> list[SpilledRows]:
    """Every bundle's Spilled -> one SpilledRows (transforms.once.OnceWithAll): the schema of
    every row, and each bucket's files from every bundle."""
    tallies, buckets = [infer.create_accumulator()], {}
    for spilled in spills:
        tallies.append(spilled.tallies)
        for bucket, spill in spilled.files:
            buckets.setdefault(bucket, []).append(spill)
    schema = infer.extract_output(infer.merge_accumulators(tallies))
    return [SpilledRows(schema, tuple(tuple(files) for _, files in sorted(buckets.items())))]


def _frames(path: str) -> Iterator[bytes]:
    """The frames of a bucket file, each with its length, one at a time."""
    with open(path, "rb") as f:
        while head := f.read(_LENGTH.size):
            yield head + f.read(_LENGTH.unpack(head)[0])


def _split(bucket: Sequence[SpillFile], rng: random.Random, bucket_bytes: int) -> list[list[SpillFile]]:
    """A bucket larger than `bucket_bytes` as smaller ones: each frame into one of them at random
    (each of its files into files of the same sources, whose indexes its frames hold)."""
    parts = min(MAX_BUCKETS, math.ceil(2 * sum(spill.size for spill in bucket) / bucket_bytes))
    smaller = [[] for _ in range(parts)]
    for spill in bucket:
        writer = _BucketWriter(os.path.dirname(spill.path), list(spill.sources))
        for data in _frames(spill.path):
            stopping.check()
            writer.write(rng.randrange(parts), data)
        for part, piece in writer.close():
            smaller[part].append(piece)
    return [files for files in smaller if files]


def permuted_rows(
    bucket: Sequence[SpillFile], splits: tuple[str, ...], rng: random.Random, bucket_bytes: int = BUCKET_BYTES
) -> Iterator[Row]:
    """The rows of a bucket in random order, holding at most one bucket of `bucket_bytes` (and
    one row beyond it) in memory: a larger one is split first (_split), and the files of its
    parts removed once read. `splits`: the split names, in the order the frames number them."""
    if sum(spill.size for spill in bucket) > bucket_bytes and sum(spill.rows for spill in bucket) > 1:
        for part in _split(bucket, rng, bucket_bytes):
            yield from permuted_rows(part, splits, rng, bucket_bytes)
            for spill in part:
                os.remove(spill.path)
        return
    data = bytearray(sum(spill.size for spill in bucket))
    offsets = np.empty(sum(spill.rows for spill in bucket), dtype=np.int64)
    starts, position, row = [], 0, 0
    for spill in bucket:
        starts.append(position)
        with open(spill.path, "rb") as f:
            if f.readinto(memoryview(data)[position : position + spill.size]) != spill.size:
                raise OSError(f"{spill.path}: shorter than the {spill.size:,} bytes spilled into it")
        end = position + spill.size
        while position < end and row < len(offsets):
            offsets[row] = position
            position += _LENGTH.size + _LENGTH.unpack_from(data, position)[0]
            row += 1
        if position != end:
            raise OSError(f"{spill.path}: holds other than the {spill.rows:,} rows spilled into it")
    if row != len(offsets):
        raise OSError(f"{bucket[-1].path}: holds other than the rows spilled into it")
    np.random.default_rng(rng.getrandbits(128)).shuffle(offsets)
    view = memoryview(data)
    for first in range(0, len(offsets), _BATCH):
        for offset in offsets[first : first + _BATCH].tolist():  # Python ints a batch at a time
            spill = bucket[bisect.bisect_right(starts, offset) - 1]
            yield _unframe(view, offset, spill.sources, splits)


class WriteSpilledRows(beam.DoFn):
    """SpilledRows -> each bucket's rows, in random order (permuted_rows), encoded with the schema
    (tabular.encode_row) and written into their shards (BundleShards). Outputs one
    OutcomeSummary of its records per bundle that wrote any, the ShardParts on SHARD_PARTS, and
    the rows that make no record on DEAD_LETTERS. Each row counts into the `converting` phase
    (transforms.progress), of every row spilled."""

    def __init__(
        self, layout: ShardLayout, columns: Sequence[str], splits: Sequence[str], decimal: str, label: str = ""
    ):
        self._layout, self._columns, self._splits, self._decimal = layout, tuple(columns), tuple(splits), decimal
        self._label = label
        self._written, self._errors = counter("written"), counter("errors")
        self._converting = progress.Phase("converting", "rows")

    def setup(self):
        self._random = random.Random()

    def start_bundle(self):
        self._shards, self._summary, self._counted = BundleShards(self._layout), OutcomeSummary(), False

    def process(self, spilled: SpilledRows):
        self._converting.set_total(sum(spill.rows for bucket in spilled.buckets for spill in bucket))
        for bucket in spilled.buckets:
            for row in progress.counted(permuted_rows(bucket, self._splits, self._random), self._converting):
                stopping.check()
                outcome = encode_row(row, self._columns, spilled.schema, self._decimal, self._label)
                if isinstance(outcome, DeadLetter):
                    self._errors.inc()
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)
                    continue
                self._shards.write(outcome.split, outcome.data)
                self._summary.add(outcome)
                self._counted = True
                self._written.inc()

    def finish_bundle(self):
        if self._counted:
            yield GlobalWindows.windowed_value(self._summary)
        for part in self._shards.close():
            yield beam.pvalue.TaggedOutput(SHARD_PARTS, GlobalWindows.windowed_value(part))


class SpillOutcomes(NamedTuple):
    counted: beam.PCollection  # OutcomeSummary of the records, one per bundle
    shard_files: beam.PCollection  # the paths of the written shards
    dead_letters: list[beam.PCollection]
    schema: beam.PCollection  # the inferred column types (one element)


def convert_through_spill(
    files,
    root: str,
    columns,
    fractions,
    dialect: CsvDialect,
    infer: InferSchema,
    layout: ShardLayout,
    input_bytes: int,
    label: str = "",
) -> SpillOutcomes:
    """The CSV files' metadata -> records in their shards, through the spill (module docstring);
    `infer` types the columns, `label` is the column whose classes it finds."""
    folder, buckets = spill_folder(layout), bucket_count(input_bytes)
    reading = SpillRows(
        root, columns, fractions, dialect.delimiter, infer, folder, buckets, input_bytes, dialect.header
    )
    spilled = files | "SpillRows" >> beam.ParDo(reading).with_outputs(DEAD_LETTERS, main="spills")
    rows = spilled.spills | "MergeSpills" >> OnceWithAll(merge_spills, infer)
    splits = tuple(name for name, _ in fractions)
    written = rows | "WriteSpilledRows" >> beam.ParDo(
        WriteSpilledRows(layout, columns, splits, dialect.decimal, label)
    ).with_outputs(DEAD_LETTERS, SHARD_PARTS, main="counted")
    return SpillOutcomes(
        written.counted,
        written[SHARD_PARTS] | "FinalizeShards" >> FinalizeShards(layout),
        [spilled.dead_letters, written.dead_letters],
        rows | "Schema" >> beam.Map(lambda spilled_rows: spilled_rows.schema),
    )
