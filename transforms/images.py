"""Reading image sources into Example records (or dead letters), several files at a time."""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from transforms import progress, stopping
from transforms.convert_pool import ConvertPool, Item
from transforms.counting import counter
from transforms.image_convert import ImageConverter, ImageSettings
from transforms.outcomes import DEAD_LETTERS, OutcomeSummary, Record, Source, Written
from transforms.part_appender import processes_may_append
from transforms.same_content import CONTENT, Copy
from transforms.shard_parts import SHARD_PARTS, BundleShards, ShardLayout, SharedParts

_LOG = logging.getLogger(__name__)


class _OnThreads:
    """ImageConverter.convert on a pool of `threads` threads, one chunk of each batch per thread:
    file and GCS reads and Pillow's decoding release the GIL, so they overlap on a single-threaded
    runner, and GCS latency overlaps on Dataflow. The same calls as a ConvertPool."""

    def __init__(self, converter: ImageConverter, threads: int):
        self._converter = converter
        self._threads = threads
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="read-images")
        self._chunks: collections.deque[tuple[concurrent.futures.Future, int]] = collections.deque()
        self.pending = 0
        self.queue_depth = 0  # two batches (ReadImages.process)

    def submit(self, items: list[Item]) -> None:
        size = -(-len(items) // self._threads)
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            self._chunks.append((self._pool.submit(self._convert_chunk, chunk), len(chunk)))
            self.pending += len(chunk)

    def _convert_chunk(self, items: list[Item]) -> list[tuple]:
        return [self._converter.convert(source, part) for source, part in items]

    def results(self, at_most_pending: int = 0) -> Iterator[tuple]:
        while self.pending > at_most_pending:
            future, size = self._chunks.popleft()
            self.pending -= size
            yield from future.result()

    def release_parts(self) -> None:
        self._converter.release()

    def shutdown(self) -> None:
        self._pool.shutdown()


class ReadImages(beam.DoFn):
    """Batch of Sources -> one Record per source, with the file's bytes (or a TensorFlow-decodable
    re-encoding), its header dimensions and its label; anything unreadable becomes a dead letter
    naming the file and why (transforms.image_convert). Per bundle, the (digest, Copy) of each
    record goes out on CONTENT as one list, to find sources with the same bytes
    (transforms.same_content): one output per bundle costs the bundle thread less than one per record.

    Sources are converted on `threads` threads or, with `processes` > 0 (local runs), in that many
    converting processes (transforms.convert_pool). Up to two batches, or the pool's queue depth
    if deeper, stay in flight across `process` calls (the rest are emitted in `finish_bundle`), so
    the converters never wait for a batch's slowest source or for the bundle thread.

    Every outcome counts into the run's `converting` phase (transforms.progress), of `total`
    sources when the plan knows how many."""

    def __init__(self, settings: ImageSettings, threads: int, *, processes: int = 0, total: int | None = None):
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if processes < 0:
            raise ValueError("processes must be >= 0")
        self._settings = settings
        self._threads = threads
        self._processes = processes
        self._written, self._converted, self._errors = counter("written"), counter("converted"), counter("errors")
        self._bytes_read = counter("bytes_read")
        self._converting = progress.Phase("converting", "sources", total)

    def setup(self):
        if self._processes:
            self._conversions = ConvertPool(self._processes, self._settings)
            how = f"in {self._processes} converting processes"
        else:
            self._conversions = _OnThreads(ImageConverter(self._settings), self._threads)
            how = f"on {self._threads} threads"
        # How this worker reads, and (in the log's timestamp) when its first image is read: the
        # benchmark's start-up figure.
        _LOG.info("reading images %s", how)

    def start_bundle(self):
        for _ in self._conversions.results():  # what a failed attempt left converting: not this attempt's
            pass
        self._copies = []

    def teardown(self):
        self._conversions.shutdown()

    def _items(self, sources: list[Source]) -> list[Item]:
        """What to convert: each source, and the part its record is appended to (none: returned)."""
        return [(source, None) for source in sources]

    def process(self, sources: list[Source]):
        stopping.check()
        self._conversions.submit(self._items(sources))
        in_flight = max(2 * len(sources), self._conversions.queue_depth)
        yield from self._emit(self._conversions.results(at_most_pending=in_flight))

    def finish_bundle(self):
        for output in self._emit(self._conversions.results()):
            if isinstance(output, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(output.tag, GlobalWindows.windowed_value(output.value))
            else:
                yield GlobalWindows.windowed_value(output)
        if self._copies:
            yield beam.pvalue.TaggedOutput(CONTENT, GlobalWindows.windowed_value(self._copies))

    def _emit(self, converted):
        """Counts outcomes (on the bundle thread, where Beam counters count) and yields them; stops
        between them once the run is stopped (transforms.stopping)."""
        for outcome, bytes_read in converted:
            stopping.check()
            self._bytes_read.inc(bytes_read)
            self._converting.add()
            if isinstance(outcome, Record | Written):
                self._written.inc()
                self._converted.inc(outcome.converted)
                self._copies.append((outcome.digest, Copy(outcome.source, outcome.split, outcome.label)))
                yield from self._record_outputs(outcome)
            else:
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)

    def _record_outputs(self, record: Record):
        """What the step outputs for a record: the record."""
        yield record


class ReadImagesIntoShards(ReadImages):
    """ReadImages that puts each record into its shard (transforms.shard_parts) instead of
    outputting it: for the lean local runner, which holds a step's whole output until its bundle
    ends. Into local parts each record is appended by whichever thread or process made it
    (SharedParts); the bundle thread writes the others (BundleShards): records into gs:// parts,
    where processes may not share a file (part_appender.processes_may_append), and records worth
    deflating, which the converters hand back so that each shard's are deflated as one stream. Per
    bundle it outputs one OutcomeSummary of its records, and the ShardParts it wrote on
    SHARD_PARTS; dead letters as ReadImages. A bundle without records outputs no summary (as
    counting.CountRecords, which says why)."""

    def __init__(self, layout: ShardLayout, settings: ImageSettings, *args, **kwargs):
        super().__init__(dataclasses.replace(settings, compression=layout.compression), *args, **kwargs)
        self._layout = layout

    def setup(self):
        super().setup()
        self._shared = self._layout.local and (not self._processes or processes_may_append(self._layout.folder))

    def start_bundle(self):
        super().start_bundle()
        self._shared_parts, self._written_parts = SharedParts(self._layout), BundleShards(self._layout)
        self._summary, self._counted = OutcomeSummary(), False

    def _items(self, sources: list[Source]) -> list[Item]:
        if not self._shared:
            return super()._items(sources)
        return [(source, self._shared_parts.assign(source.split)) for source in sources]

    def _record_outputs(self, record: Record | Written):
        if isinstance(record, Written):
            self._shared_parts.add(record)
        else:
            self._written_parts.write(record.split, record.data)
        self._summary.add(record)
        self._counted = True
        return ()

    def finish_bundle(self):
        yield from super().finish_bundle()
        self._conversions.release_parts()
        if self._counted:
            yield GlobalWindows.windowed_value(self._summary)
        for part in [*self._shared_parts.close(), *self._written_parts.close()]:
            yield beam.pvalue.TaggedOutput(SHARD_PARTS, GlobalWindows.windowed_value(part))
