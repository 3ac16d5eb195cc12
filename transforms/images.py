"""Reading image sources into Example records (or dead letters), several files at a time."""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import time

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from pipeline import storage
from transforms.check_pool import CheckPool
from transforms.example_proto import image_example
from transforms.image_check import BadImage, Encoding, check_image
from transforms.outcomes import DEAD_LETTERS, DeadLetter, OutcomeSummary, Record, Source, counter
from transforms.shard_parts import SHARD_PARTS, BundleShards, ShardLayout

_LOG = logging.getLogger(__name__)


class ReadImages(beam.DoFn):
    """Batch of Sources -> one Record per source, with the file's bytes (or a TensorFlow-decodable
    re-encoding), its header dimensions and its label; anything unreadable becomes a dead letter
    naming the file and why.

    Sources are converted on `threads` threads: file and GCS reads and Pillow's decoding (the
    integrity check) release the GIL, so they overlap on a single-threaded runner, and GCS latency
    overlaps on Dataflow. Each batch is split into one chunk per thread, and up to two batches'
    chunks stay in flight across `process` calls (the rest are emitted in `finish_bundle`), so the
    threads never wait for a batch's slowest source or for the bundle thread. With
    `check_processes` > 0 (local runs) the checks run on that many worker processes
    (transforms.check_pool), fed by at least two threads each.

    `label_offset` is added to every label id (1 for ImageNet-style readers, whose labels are
    1-based); `encoding` says how images not stored byte for byte are encoded (jpeg_only)."""

    PROGRESS_SECONDS = 10.0

    def __init__(
        self,
        label_map,
        keys,
        max_pixels: int,
        threads: int,
        *,
        label_offset: int = 0,
        encoding: Encoding | None = None,
        check_processes: int = 0,
    ):
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if check_processes < 0:
            raise ValueError("check_processes must be >= 0")
        if label_offset < 0:
            raise ValueError("label_offset must be >= 0")
        self._label_map = tuple(label_map)
        self._keys = dict(keys)
        self._max_pixels = max_pixels
        self._threads = max(threads, 2 * check_processes)
        self._check_processes = check_processes
        self._label_offset = label_offset
        self._encoding = encoding or Encoding()
        self._written, self._converted, self._errors = counter("written"), counter("converted"), counter("errors")
        self._bytes_read = counter("bytes_read")

    def setup(self):
        self._label_ids = {label: i for i, label in enumerate(self._label_map)}
        self._done = 0
        self._started = self._last_report = time.monotonic()
        self._pool = concurrent.futures.ThreadPoolExecutor(self._threads, thread_name_prefix="read-images")
        self._checks = (
            CheckPool(self._check_processes, self._max_pixels, self._encoding) if self._check_processes else None
        )
        # How this worker reads, and (in the log's timestamp) when its first image is read: the
        # benchmark's start-up figure.
        processes = f", checks in {self._check_processes} processes" if self._check_processes else ""
        _LOG.info("reading images on %d threads%s", self._threads, processes)

    def start_bundle(self):
        self._in_flight = collections.deque()  # futures of chunks' [(outcome, bytes read)], in order

    def teardown(self):
        self._pool.shutdown()
        if self._checks is not None:
            self._checks.shutdown()

    def _check(self, data: bytes):
        if self._checks is None:
            return check_image(data, self._max_pixels, self._encoding)
        return self._checks.check(data)

    def process(self, sources: list[Source]):
        size = -(-len(sources) // self._threads)
        for start in range(0, len(sources), size):
            self._in_flight.append(self._pool.submit(self._convert_chunk, sources[start : start + size]))
        while len(self._in_flight) > 2 * self._threads:
            yield from self._emit(self._in_flight.popleft().result())

    def finish_bundle(self):
        while self._in_flight:
            for output in self._emit(self._in_flight.popleft().result()):
                if isinstance(output, beam.pvalue.TaggedOutput):
                    yield beam.pvalue.TaggedOutput(output.tag, GlobalWindows.windowed_value(output.value))
                else:
                    yield GlobalWindows.windowed_value(output)

    def _emit(self, converted: list[tuple[Record | DeadLetter, int]]):
        """Counts a chunk's outcomes (on the bundle thread, where Beam counters count) and yields them."""
        for outcome, bytes_read in converted:
            self._bytes_read.inc(bytes_read)
            self._report_progress()
            if isinstance(outcome, Record):
                self._written.inc()
                self._converted.inc(outcome.converted)
                yield from self._record_outputs(outcome)
            else:
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)

    def _record_outputs(self, record: Record):
        """What the step outputs for a record: the record."""
        yield record

    def _convert_chunk(self, sources: list[Source]) -> list[tuple[Record | DeadLetter, int]]:
        return [self._convert(source) for source in sources]

    def _convert(self, source: Source) -> tuple[Record | DeadLetter, int]:
        """(outcome, bytes read). Runs on a pool thread, where Beam counters would count nothing:
        _emit counts."""
        label_id = self._label_ids.get(source.label)
        if label_id is None:
            return DeadLetter(
                source.uri, "label", f"label {source.label!r} is not in the label map (source added after planning?)"
            ), 0
        try:
            data = storage.read_bytes(source.uri)
        except Exception as e:  # any I/O failure is this file's, not the job's
            return DeadLetter(source.uri, "read", f"cannot read: {type(e).__name__}: {e}"), 0
        try:
            image = self._check(data)
        except BadImage as e:
            return DeadLetter(source.uri, e.stage, e.reason), len(data)
        example = image_example(self._keys, image, label_id + self._label_offset, source.label, source.uri, source.key)
        return Record(source.split, source.label, image.converted, example), len(data)

    def _report_progress(self):
        self._done += 1
        now = time.monotonic()
        if now - self._last_report >= self.PROGRESS_SECONDS:
            self._last_report = now
            _LOG.info("converted %d sources in this worker (%.0f/s)", self._done, self._done / (now - self._started))


class ReadImagesIntoShards(ReadImages):
    """ReadImages that writes each record into its shard (transforms.shard_parts) instead of
    outputting it: for the lean local runner, which holds a step's whole output until its bundle
    ends. Per bundle it outputs one OutcomeSummary of its records, and the ShardParts it wrote on
    SHARD_PARTS; dead letters as ReadImages."""

    def __init__(self, layout: ShardLayout, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._layout = layout

    def start_bundle(self):
        super().start_bundle()
        self._shards, self._summary = BundleShards(self._layout), OutcomeSummary()

    def _record_outputs(self, record: Record):
        self._shards.write(record.split, record.data)
        self._summary.add(record)
        return ()

    def finish_bundle(self):
        yield from super().finish_bundle()
        yield GlobalWindows.windowed_value(self._summary)
        for part in self._shards.close():
            yield beam.pvalue.TaggedOutput(SHARD_PARTS, GlobalWindows.windowed_value(part))
