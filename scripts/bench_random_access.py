#!/usr/bin/env python3
"""Random access and shuffling for a training job: the same tf.train.Example records as ArrayRecord
and as TFRecord, read sequentially, read at random, and read in a globally shuffled order, side by
side.

Usage::

    python scripts/bench_random_access.py [--records 20000] [--photos bench/photos2k | --record_kb 100]
        [--runs 3] [--random_reads 2000] [--slow_reads 20] [--shuffle_buffer N] [--docs docs/performance.md]

The corpus: `--records` Examples (`image/encoded`, `image/format`, `image/class/label`,
`image/source_id` = the record's index), their payloads the photos of `--photos` taken in turn
(default bench/photos2k where it exists; scripts/make_photo_corpus.py makes it), or random bytes of
about `--record_kb` kB each. They are written once, in shards of `--shard_mb` (the converter's
target), in each format: ArrayRecord with `group_size:1` (array_record's default, which Grain
requires) and with `--group_size` records per compressed group; uncompressed TFRecord with a `.idx`
index of "offset length" per record (as DALI and the `tfrecord` package read); and GZIP TFRecord
as the converter writes it (deflate chosen per stream, transforms/gzip_choice.py). Every run, for
each format:

* sequential: every record in file order (array_record's reader; TFRecord through tf.data),
  records/s and MB/s of Examples;
* random reads: `--random_reads` records at random indices, the same indices for every format, one
  at a time (Grain's ArrayRecordDataSource; seek + read at the `.idx` offset; GZIP: tf.data skipping
  to the record, which inflates everything before it in its shard, so only `--slow_reads` of them,
  as for the grouped ArrayRecord);
* one shuffled epoch: every record once in the order of Grain's IndexSampler (an exact global
  shuffle), read as the random reads are; the slow formats' epoch is estimated from their random
  reads. TFRecord's streamed epoch is the trainer's reader (trainer/input_fn.py `record_dataset`:
  shard files shuffled, interleaved, records through a shuffle buffer of `--shuffle_buffer`,
  default 1% of the records), read for two epochs (each record's `image/source_id` parsed, a batch
  at a time, for the order). How far from uniform a shuffle is: the median
  distance in an epoch between records stored side by side in a shard (a uniform shuffle: about
  0.29x the records), and the rank correlation of each record's positions in two epochs (0:
  independent shuffles; 1: the same order).

Every record read is checked against the corpus (CRC-32 of random reads, lengths of the others, the
set of records of each streamed epoch); a wrong record stops the script. The files stay in the page
cache, so the figures are the readers' CPU cost, not a disk's or GCS's latency. Prints the medians
of `--runs` runs; `--docs PAGE` writes the table into that page's block `random-access` too, with
this command and the machine (bench_docs).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import random
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib.metadata import version

import numpy as np
from array_record.python.array_record_data_source import ArrayRecordDataSource
from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter
from bench_corpus import list_corpus
from bench_docs import check_blocks, invoked_command, markdown_table, write_tables
from bench_settings import REPO_ROOT

from core.tfrecord_framing import framed
from transforms.example_proto import encode_example
from transforms.gzip_choice import ChoosingCompressor

DOCS_BLOCK = "random-access"
DEFAULT_PHOTOS = os.path.join(REPO_ROOT, "bench", "photos2k")
PHOTO_EXTENSIONS = (".jpg", ".jpeg")
SHARD_PATTERN = "train-{:05d}-of-{:05d}.{}"
BATCH = 256  # records per call where a reader takes batches (sequential reads, id parsing)
MB = 1e6
SIZED_ON = 100  # records whose mean size sets the records per shard
# The formats, each in its own folder: (key, file extension).
AR_1, AR_GROUPED, TFRECORD, GZIP = "array_record_1", "array_record_grouped", "tfrecord", "tfrecord_gzip"
EXTENSIONS = {AR_1: "array_record", AR_GROUPED: "array_record", TFRECORD: "tfrecord", GZIP: "tfrecord.gz"}
HEADINGS = (
    "format, reader",
    "on disk MB",
    "sequential rec/s",
    "sequential MB/s",
    "random reads rec/s",
    "one shuffled epoch s",
    "epoch vs TFRecord streamed",
    "shuffle",
    "records apart in an epoch, stored side by side (median)",
    "epoch-to-epoch rank correlation",
    "shuffle memory MB",
)


class WrongRecords(SystemExit):
    """A reader returned other records than the corpus holds: its figures would mean nothing."""


# -- the corpus


@dataclasses.dataclass
class Corpus:
    """The records written, in shards of `per_shard`: what a read is checked against."""

    folder: str
    lengths: list[int]
    crcs: list[int]
    per_shard: int
    group_size: int

    @property
    def records(self) -> int:
        return len(self.lengths)

    @property
    def bytes(self) -> int:
        return sum(self.lengths)

    @property
    def shards(self) -> int:
        return -(-self.records // self.per_shard)

    def shard_lengths(self) -> list[int]:
        return [min(self.per_shard, self.records - s * self.per_shard) for s in range(self.shards)]

    def paths(self, fmt: str) -> list[str]:
        names = (SHARD_PATTERN.format(s, self.shards, EXTENSIONS[fmt]) for s in range(self.shards))
        return [os.path.join(self.folder, fmt, name) for name in names]

    def locate(self, index: int) -> tuple[int, int]:
        """(shard, position in it) of a record."""
        return divmod(index, self.per_shard)

    def check(self, fmt: str, indices: Sequence[int], records: Sequence[bytes]) -> None:
        """WrongRecords unless `records` are the corpus's records at `indices`."""
        if len(records) != len(indices):
            raise WrongRecords(f"{fmt}: {len(records)} records read for {len(indices)}")
        wrong = [i for i, r in zip(indices, records, strict=True) if zlib.crc32(r) != self.crcs[i]]
        if wrong:
            raise WrongRecords(f"{fmt}: other records than the corpus's at indices {wrong[:5]}")


def payloads(photos: str | None, record_kb: float, seed: int = 0) -> Callable[[int], bytes]:
    """The payload of record i: the photos of `photos` in turn, else random bytes of 0.5-1.5x
    `record_kb` kB (lengths vary, as photos' do)."""
    if photos:
        items = list_corpus(photos, PHOTO_EXTENSIONS)
        if not items:
            raise SystemExit(f"{photos}: no JPEG photos in class folders (scripts/make_photo_corpus.py makes some)")
        data = []
        for path, _ in items:
            with open(path, "rb") as f:
                data.append(f.read())
        return lambda i: data[i % len(data)]
    rng = random.Random(seed)
    return lambda i: rng.randbytes(int(record_kb * 1000 * rng.uniform(0.5, 1.5)))


def example(index: int, payload: bytes) -> bytes:
    return encode_example(
        {
            "image/encoded": payload,
            "image/format": "jpeg",
            "image/class/label": index % 5,
            "image/source_id": str(index),
        }
    )


class _ArrayRecordShard:
    def __init__(self, path: str, options: str):
        self._writer = ArrayRecordWriter(path, options)

    def write(self, record: bytes) -> None:
        self._writer.write(record)

    def close(self) -> None:
        self._writer.close()


class _TFRecordShard:
    """Uncompressed TFRecord and its `.idx`: the offset and framed length of each record."""

    def __init__(self, path: str):
        self._file, self._index, self._offset = open(path, "wb"), open(f"{path}.idx", "w"), 0

    def write(self, record: bytes) -> None:
        pieces = framed(record)
        self._file.writelines(pieces)
        length = sum(map(len, pieces))
        self._index.write(f"{self._offset} {length}\n")
        self._offset += length

    def close(self) -> None:
        self._file.close()
        self._index.close()


class _GzipTFRecordShard:
    """GZIP TFRecord as the converter writes it: one stream, its deflate chosen on its first MiB."""

    def __init__(self, path: str):
        self._file, self._compressor = open(path, "wb"), ChoosingCompressor(wbits=31)

    def write(self, record: bytes) -> None:
        for piece in framed(record):
            self._file.write(self._compressor.compress(piece))

    def close(self) -> None:
        self._file.write(self._compressor.flush())
        self._file.close()


def write_corpus(
    folder: str, records: int, payload: Callable[[int], bytes], shard_mb: float, group_size: int
) -> Corpus:
    """Writes `records` Examples in every format, each shard of `shard_mb` in every format holding
    the same records."""
    ahead = [example(i, payload(i)) for i in range(min(records, SIZED_ON))]
    per_shard = max(1, int(shard_mb * MB * len(ahead) // sum(map(len, ahead))))
    corpus = Corpus(folder, [], [], per_shard, group_size)
    openers = {
        AR_1: lambda path: _ArrayRecordShard(path, "group_size:1"),
        AR_GROUPED: lambda path: _ArrayRecordShard(path, f"group_size:{group_size}"),
        TFRECORD: _TFRecordShard,
        GZIP: _GzipTFRecordShard,
    }
    for fmt in openers:
        os.makedirs(os.path.join(folder, fmt))
    corpus.lengths = [0] * records  # sized now, so that paths() names the final shard count
    open_shards = {}
    for i in range(records):
        record = ahead[i] if i < len(ahead) else example(i, payload(i))
        corpus.lengths[i] = len(record)
        corpus.crcs.append(zlib.crc32(record))
        shard, position = corpus.locate(i)
        if position == 0:
            for writer in open_shards.values():
                writer.close()
            open_shards = {fmt: opener(corpus.paths(fmt)[shard]) for fmt, opener in openers.items()}
        for writer in open_shards.values():
            writer.write(record)
    for writer in open_shards.values():
        writer.close()
    return corpus


def disk_bytes(corpus: Corpus, fmt: str) -> int:
    """The format's files, `.idx` files included."""
    folder = os.path.join(corpus.folder, fmt)
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))


# -- the readers


def sequential(corpus: Corpus, fmt: str) -> tuple[int, int]:
    """(records, bytes) of every record in file order."""
    if fmt in (AR_1, AR_GROUPED):
        count = size = 0
        for path in corpus.paths(fmt):
            reader = ArrayRecordReader(path)
            total = reader.num_records()
            for start in range(0, total, BATCH):
                batch = reader.read(start, min(total, start + BATCH))
                count, size = count + len(batch), size + sum(map(len, batch))
            reader.close()
        return count, size
    import tensorflow as tf

    from trainer.input_fn import READ_BUFFER_BYTES

    compression = "GZIP" if fmt == GZIP else ""
    dataset = tf.data.TFRecordDataset(corpus.paths(fmt), compression_type=compression, buffer_size=READ_BUFFER_BYTES)
    sizes = dataset.batch(BATCH).map(lambda b: (tf.size(b), tf.reduce_sum(tf.strings.length(b, unit="BYTE"))))
    count = size = 0
    for n, b in sizes.as_numpy_iterator():
        count, size = count + int(n), size + int(b)
    return count, size


def _indexed_reads(corpus: Corpus, indices: Iterable[int]) -> Iterator[bytes]:
    """Uncompressed TFRecord by its `.idx`: a seek and a read per record."""
    offsets = []
    for path in corpus.paths(TFRECORD):
        with open(f"{path}.idx") as f:
            offsets.append([tuple(map(int, line.split())) for line in f])
    files = [open(path, "rb") for path in corpus.paths(TFRECORD)]
    try:
        for index in indices:
            shard, position = corpus.locate(index)
            offset, length = offsets[shard][position]
            files[shard].seek(offset)
            yield files[shard].read(length)[12:-4]  # the payload between its header and its CRC
    finally:
        for f in files:
            f.close()


def _array_record_reads(corpus: Corpus, fmt: str, indices: Iterable[int]) -> Iterator[bytes]:
    """One record at a time through Grain's ArrayRecordDataSource (random-access reader options)."""
    with ArrayRecordDataSource(corpus.paths(fmt)) as source:
        for index in indices:
            yield source[index]


def _gzip_reads(corpus: Corpus, indices: Iterable[int]) -> Iterator[bytes]:
    """tf.data to record i of a GZIP shard: it inflates and skips every record before it."""
    import tensorflow as tf

    paths = corpus.paths(GZIP)
    for index in indices:
        shard, position = corpus.locate(index)
        dataset = tf.data.TFRecordDataset(paths[shard], compression_type="GZIP").skip(position).take(1)
        yield dataset.get_single_element().numpy()


def random_reads(corpus: Corpus, fmt: str, indices: Iterable[int]) -> Iterator[bytes]:
    """The records at `indices`, in that order, read one at a time as the format allows."""
    if fmt == TFRECORD:
        return _indexed_reads(corpus, indices)
    if fmt == GZIP:
        return _gzip_reads(corpus, indices)
    return _array_record_reads(corpus, fmt, indices)


def global_order(records: int, epochs: int, seed: int) -> list[list[int]]:
    """The record keys of each epoch as Grain's IndexSampler shuffles them (exact, global)."""
    import grain.python as grain

    sampler = grain.IndexSampler(records, shuffle=True, num_epochs=epochs, seed=seed)
    keys = [sampler[i].record_key for i in range(records * epochs)]
    return [keys[e * records : (e + 1) * records] for e in range(epochs)]


def shuffled_epoch(corpus: Corpus, fmt: str, order: Sequence[int]) -> None:
    """Every record once in `order`; WrongRecords unless each has its record's length."""
    count = 0
    for index, record in zip(order, random_reads(corpus, fmt, order), strict=True):
        if len(record) != corpus.lengths[index]:
            raise WrongRecords(
                f"{fmt}: the record read for index {index} has {len(record)} bytes, not {corpus.lengths[index]}"
            )
        count += 1
    if count != corpus.records:
        raise WrongRecords(f"{fmt}: {count} records in a shuffled epoch of {corpus.records}")


def streamed_epochs(corpus: Corpus, fmt: str, shuffle_buffer: int, epochs: int) -> tuple[list[float], list[list[int]]]:
    """(seconds, record indices in the order read) of each epoch of the trainer's training reader."""
    import tensorflow as tf

    from trainer.input_fn import record_dataset

    dataset = record_dataset(
        corpus.paths(fmt),
        training=True,
        repeat=False,
        shuffle_buffer=shuffle_buffer,
        lengths=corpus.shard_lengths(),
        compression_type="GZIP" if fmt == GZIP else "",
    )
    spec = {"image/source_id": tf.io.FixedLenFeature([], tf.string)}
    ids = dataset.batch(BATCH).map(
        lambda b: tf.strings.to_number(tf.io.parse_example(b, spec)["image/source_id"], tf.int64)
    )
    seconds, orders = [], []
    for _ in range(epochs):
        started = time.perf_counter()
        order = [int(i) for batch in ids.as_numpy_iterator() for i in batch]
        seconds.append(time.perf_counter() - started)
        if sorted(order) != list(range(corpus.records)):
            raise WrongRecords(f"{fmt}: a streamed epoch read {len(order)} records, not each of {corpus.records} once")
        orders.append(order)
    return seconds, orders


def _positions(order: Sequence[int]) -> np.ndarray:
    """Where each record comes in `order`."""
    positions = np.empty(len(order), dtype=np.int64)
    positions[np.asarray(order)] = np.arange(len(order))
    return positions


def rank_correlation(first: Sequence[int], second: Sequence[int]) -> float:
    """Spearman's rank correlation of each record's positions in two orders of the same records."""
    return float(np.corrcoef(_positions(first), _positions(second))[0, 1])


def neighbours_apart(corpus: Corpus, order: Sequence[int]) -> float:
    """The median distance in `order` between two records stored next to each other in a shard."""
    positions = _positions(order)
    stored_next = np.array([i for i in range(corpus.records - 1) if corpus.locate(i + 1)[1] != 0])
    return float(np.median(np.abs(positions[stored_next + 1] - positions[stored_next])))


# -- the runs


def _timed(work: Callable, *args) -> tuple[float, object]:
    started = time.perf_counter()
    result = work(*args)
    return time.perf_counter() - started, result


def measure_run(corpus: Corpus, run: int, random_count: int, slow_count: int, shuffle_buffer: int) -> dict:
    """One run of every measurement: {(format or reader, figure): value}."""
    figures = {}
    rng = random.Random(run)
    indices = [rng.randrange(corpus.records) for _ in range(random_count)]
    order = global_order(corpus.records, 1, seed=run)[0]
    formats = [AR_1, AR_GROUPED, TFRECORD, GZIP]
    for fmt in formats[run % 4 :] + formats[: run % 4]:  # who goes first turns, as the machine drifts
        seconds, (count, size) = _timed(sequential, corpus, fmt)
        if (count, size) != (corpus.records, corpus.bytes):
            raise WrongRecords(
                f"{fmt}: {count} records, {size} bytes read in file order, not {corpus.records}, {corpus.bytes}"
            )
        figures[fmt, "sequential_s"] = seconds
        asked = indices if fmt in (AR_1, TFRECORD) else indices[:slow_count]
        seconds, records = _timed(lambda *a: list(random_reads(*a)), corpus, fmt, asked)
        corpus.check(fmt, asked, records)
        figures[fmt, "random_rate"] = len(asked) / seconds
        if fmt in (AR_1, TFRECORD):
            figures[fmt, "epoch_s"], _ = _timed(shuffled_epoch, corpus, fmt, order)
        if fmt in (TFRECORD, GZIP):
            seconds, orders = streamed_epochs(corpus, fmt, shuffle_buffer, 2)
            figures[f"{fmt}_streamed", "epoch_s"] = statistics.median(seconds)
            figures[f"{fmt}_streamed", "correlation"] = rank_correlation(*orders)
            figures[f"{fmt}_streamed", "apart"] = neighbours_apart(corpus, orders[0])
    orders = global_order(corpus.records, 2, seed=run)
    figures["global", "correlation"] = rank_correlation(*orders)
    figures["global", "apart"] = neighbours_apart(corpus, orders[0])
    return figures


def _median(runs: list[dict], key: tuple[str, str]) -> float:
    return statistics.median(run[key] for run in runs)


def _correlation(value: float) -> str:
    return f"{round(value, 2) + 0.0:.2f}"  # + 0.0: no "-0.00"


def table_rows(corpus: Corpus, runs: list[dict], shuffle_buffer: int) -> list[list[str]]:
    """A row per format and reader: medians over the runs."""
    mean_mb = corpus.bytes / corpus.records / MB
    streamed_epoch_s = _median(runs, (f"{TFRECORD}_streamed", "epoch_s"))
    labels = {
        AR_1: "ArrayRecord, `group_size:1`",
        AR_GROUPED: f"ArrayRecord, `group_size:{corpus.group_size}`",
        TFRECORD: "TFRecord + `.idx`",
        GZIP: "GZIP TFRecord",
    }
    rows = []
    for fmt, label in labels.items():
        sequential_rate = corpus.records / _median(runs, (fmt, "sequential_s"))
        random_rate = _median(runs, (fmt, "random_rate"))
        measured = (fmt, "epoch_s") in runs[0]
        epoch_s = _median(runs, (fmt, "epoch_s")) if measured else corpus.records / random_rate
        index_mb = 16 * corpus.records / MB if fmt == TFRECORD else 0  # two 8-byte numbers per record
        rows.append(
            [
                label,
                f"{disk_bytes(corpus, fmt) / MB:,.0f}",
                f"{sequential_rate:,.0f}",
                f"{sequential_rate * mean_mb:,.0f}",
                f"{random_rate:,.1f}" if random_rate < 100 else f"{random_rate:,.0f}",
                f"{epoch_s:,.2f}" if measured else f"~{epoch_s:,.0f} (from the random reads)",
                f"{epoch_s / streamed_epoch_s:,.2f}x",
                "global, exact (Grain's IndexSampler)",
                f"{_median(runs, ('global', 'apart')):,.0f}",
                _correlation(_median(runs, ("global", "correlation"))),
                f"{index_mb:.1f}",
            ]
        )
        if fmt in (TFRECORD, GZIP):
            streamed = f"{fmt}_streamed"
            rows.append(
                [
                    f"{labels[fmt].removesuffix(' + `.idx`')}, streamed by the trainer's reader",
                    "",
                    "",
                    "",
                    "",
                    f"{_median(runs, (streamed, 'epoch_s')):.2f}",
                    f"{_median(runs, (streamed, 'epoch_s')) / streamed_epoch_s:.2f}x",
                    f"windowed: a buffer of {shuffle_buffer:,} records ({100 * shuffle_buffer / corpus.records:.0f}%)",
                    f"{_median(runs, (streamed, 'apart')):,.0f}",
                    _correlation(_median(runs, (streamed, "correlation"))),
                    f"{shuffle_buffer * mean_mb:,.0f} (global: {corpus.bytes / MB:,.0f})",
                ]
            )
    return rows


def describe(corpus: Corpus, source: str, runs: int, random_count: int, slow_count: int) -> str:
    """What the table measured, in a sentence above it."""
    return (
        f"{corpus.records:,} Examples of {source}, {corpus.bytes / MB:,.0f} MB, in {corpus.shards} shards per format, "
        f"array_record {version('array_record')}, Grain {version('grain')}, "
        f"medians of {runs} runs. In file order: array_record's reader, tf.data. At random "
        f"({random_count:,} records at random indices, one at a time; {slow_count} for the grouped ArrayRecord "
        "and GZIP): Grain's ArrayRecordDataSource, seek + read at the `.idx` offset, tf.data skipping to the "
        "record. A shuffled epoch: every record once in Grain's IndexSampler order, read as at random; streamed: "
        "the trainer's reader (shard files shuffled and interleaved, records through a shuffle buffer), two epochs"
    )


def load_line(start: tuple[float, ...], end: tuple[float, ...]) -> str:
    cores = len(os.sched_getaffinity(0))
    return f"Load average: {start[0]:.1f} at the start, {end[0]:.1f} at the end, on {cores} usable cores."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, default=20_000, help="Examples in the corpus (default 20,000)")
    payload = parser.add_mutually_exclusive_group()
    payload.add_argument(
        "--photos", metavar="DIR", help="payloads: these photos in turn (default bench/photos2k where it exists)"
    )
    payload.add_argument(
        "--record_kb", type=float, help="payloads: random bytes of about this many kB (default where no photos: 100)"
    )
    parser.add_argument("--shard_mb", type=float, default=128, help="shard size, MB (default 128, the converter's)")
    parser.add_argument(
        "--group_size", type=int, default=64, help="records per group of the grouped ArrayRecord (default 64)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of every measurement (default 3)")
    parser.add_argument("--random_reads", type=int, default=2000, help="random reads per run (default 2,000)")
    parser.add_argument(
        "--slow_reads",
        type=int,
        default=20,
        help="random reads per run of the grouped ArrayRecord and GZIP (default 20)",
    )
    parser.add_argument(
        "--shuffle_buffer", type=int, help="the streamed reader's shuffle buffer, records (default 1%% of them)"
    )
    parser.add_argument(
        "--tmp", metavar="DIR", help="where the corpus is written (default: the system's temporary folder)"
    )
    parser.add_argument(
        "--docs", metavar="PAGE", help=f"also write the table into this markdown page's block {DOCS_BLOCK}"
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("records", "runs", "random_reads", "slow_reads", "group_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.docs:
        check_blocks(args.docs, [DOCS_BLOCK])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.getLogger("absl").setLevel(logging.CRITICAL)  # Grain's complaint about the grouped file, jax's absence
    photos = args.photos or (DEFAULT_PHOTOS if args.record_kb is None and os.path.isdir(DEFAULT_PHOTOS) else None)
    source = (
        f"the photos of {os.path.relpath(photos, REPO_ROOT)}"
        if photos
        else f"random bytes, about {args.record_kb or 100:g} kB each"
    )
    shuffle_buffer = args.shuffle_buffer or max(2, args.records // 100)
    import tensorflow as tf

    tf.data.Dataset.range(1).get_single_element()  # TensorFlow's start-up is no reader's cost
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_random_access-", dir=args.tmp) as folder:
        print(f"writing {args.records:,} records in every format to {folder} ...", file=sys.stderr, flush=True)
        corpus = write_corpus(
            folder, args.records, payloads(photos, args.record_kb or 100), args.shard_mb, args.group_size
        )
        runs = []
        for run in range(args.runs):
            runs.append(measure_run(corpus, run, args.random_reads, args.slow_reads, shuffle_buffer))
            print(f"run {run + 1} of {args.runs} done", file=sys.stderr, flush=True)
        rows = table_rows(corpus, runs, shuffle_buffer)
    text = "\n\n".join(
        [
            describe(corpus, source, args.runs, args.random_reads, args.slow_reads) + ":",
            markdown_table(HEADINGS, rows, "l" + "r" * 6 + "lrrr"),
            load_line(load_start, os.getloadavg()),
        ]
    )
    print(text)
    if args.docs:
        command = invoked_command(__file__, sys.argv[1:] if argv is None else argv)
        write_tables(args.docs, {DOCS_BLOCK: text}, command)


if __name__ == "__main__":
    main()
