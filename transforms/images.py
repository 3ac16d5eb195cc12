"""Reading image sources into Example records (or dead letters), several files at a time."""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import time

import apache_beam as beam

from pipeline import storage
from transforms.example_proto import encode_example
from transforms.image_check import BadImage, Encoding, check_image
from transforms.outcomes import DEAD_LETTERS, DeadLetter, Record, Source, counter

_LOG = logging.getLogger(__name__)


def source_id(key: str) -> str:
    """`image/source_id` of the source with this key (its path below the input, or its URI as the
    CSV wrote it): stable across reruns and bucket moves, and a decimal integer below 2**53, since
    Model Garden's parsers read it with tf.strings.to_number(int64) and COCO tools, JSON and float64
    carry such ids exactly."""
    return str(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") >> 11)


class ReadImages(beam.DoFn):
    """Batch of Sources -> one Record per source, with the file's bytes (or a TensorFlow-decodable
    re-encoding), its header dimensions and its label; anything unreadable becomes a dead letter
    naming the file and why.

    The sources of a batch are converted on `threads` threads: file and GCS reads and Pillow's
    decoding (the integrity check) release the GIL, so they overlap on a single-threaded runner,
    and GCS latency overlaps on Dataflow.

    `label_offset` is added to every label id (1 for ImageNet-style readers, whose labels are
    1-based); `encoding` says how images not stored byte for byte are encoded (jpeg_only)."""

    PROGRESS_SECONDS = 10.0

    def __init__(
        self, label_map, keys, max_pixels: int, threads: int, *, label_offset: int = 0, encoding: Encoding | None = None
    ):
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if label_offset < 0:
            raise ValueError("label_offset must be >= 0")
        self._label_map = tuple(label_map)
        self._keys = dict(keys)
        self._max_pixels = max_pixels
        self._threads = threads
        self._label_offset = label_offset
        self._encoding = encoding or Encoding()
        self._written, self._converted, self._errors = counter("written"), counter("converted"), counter("errors")
        self._bytes_read = counter("bytes_read")

    def setup(self):
        self._label_ids = {label: i for i, label in enumerate(self._label_map)}
        self._done = 0
        self._started = self._last_report = time.monotonic()
        self._pool = concurrent.futures.ThreadPoolExecutor(self._threads, thread_name_prefix="read-images")

    def teardown(self):
        self._pool.shutdown()

    def process(self, sources: list[Source]):
        for outcome, bytes_read in self._pool.map(self._convert, sources):
            self._bytes_read.inc(bytes_read)
            self._report_progress()
            if isinstance(outcome, Record):
                self._written.inc()
                self._converted.inc(outcome.converted)
                yield outcome
            else:
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)

    def _convert(self, source: Source) -> tuple[Record | DeadLetter, int]:
        """(outcome, bytes read). Runs on a pool thread, where Beam counters would count nothing:
        process() counts."""
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
            image = check_image(data, self._max_pixels, self._encoding)
        except BadImage as e:
            return DeadLetter(source.uri, e.stage, e.reason), len(data)
        keys = self._keys
        example = encode_example(
            {
                keys["encoded"]: image.data,
                keys["format"]: image.format,
                keys["height"]: image.height,
                keys["width"]: image.width,
                keys["channels"]: image.channels,
                keys["label"]: label_id + self._label_offset,
                keys["text"]: source.label,
                keys["filename"]: source.uri,
                keys["source_id"]: source_id(source.key),
            }
        )
        return Record(source.split, source.label, image.converted, example), len(data)

    def _report_progress(self):
        self._done += 1
        now = time.monotonic()
        if now - self._last_report >= self.PROGRESS_SECONDS:
            self._last_report = now
            _LOG.info("converted %d sources in this worker (%.0f/s)", self._done, self._done / (now - self._started))
