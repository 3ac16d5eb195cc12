"""The script variants the pipeline is compared with, each run by `benchmark.py --worker VARIANT` in
its own timed subprocess, and the untimed `count` worker that checks an output folder.

A subprocess' wall-clock time includes its imports, so each worker imports what its variant needs
inside its own function. core.contract, which every variant imports, uses neither Beam nor
TensorFlow; the floors import only the pipeline's own per-image code (transforms.image_check,
transforms.example_proto), which uses neither either.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pathlib
import sys
import time

from bench_corpus import list_corpus
from bench_settings import FLOOR_VARIANTS, RESULT_TAG

# The plain Beam variant's shard count: a fixed, typical choice, not planned from the input.
PLAIN_BEAM_SHARDS = 8
# Chunks per floor process: contiguous runs of files, several per process so that none waits long
# for the slowest.
FLOOR_CHUNKS_PER_PROCESS = 4


def _label_ids(items):
    return {label: i for i, label in enumerate(sorted({label for _, label in items}))}


def _image_format(path: str) -> bytes:
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    return b"jpeg" if ext in ("jpg", "jpeg") else ext.encode()


def _make_example(tf, keys: dict, raw: bytes, shape, path: str, label: str, label_id: int):
    """The Example the pipeline writes for one image, under the pipeline's feature keys (`keys`)."""

    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def i(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))

    features = {
        "encoded": b(raw),
        "height": i(shape[0]),
        "width": i(shape[1]),
        "channels": i(shape[2]),
        "label": i(label_id),
        "text": b(label.encode()),
        "filename": b(os.path.basename(path).encode()),
        "format": b(_image_format(path)),
    }
    return tf.train.Example(features=tf.train.Features(feature={keys[role]: f for role, f in features.items()}))


def _decode_shape(tf, raw, path: str):
    """The decoded image's (height, width, channels): tf.io.decode_jpeg for JPEG files, as in the
    tutorials (the photo corpus is all JPEG); tf.io.decode_image for anything else."""
    if _image_format(path) == b"jpeg":
        return tf.io.decode_jpeg(raw).shape
    return tf.io.decode_image(raw, expand_animations=False).shape


def worker_serial_tf(items, dest) -> dict:
    """The TensorFlow tutorials' serial loop, writing one GZIP TFRecord file."""
    import tensorflow as tf

    from core.contract.features import DEFAULT_IMAGE_KEYS
    from core.contract.layout import GZIP, record_files

    t0 = time.perf_counter()
    ids = _label_ids(items)
    written = 0
    with tf.io.TFRecordWriter(os.path.join(dest, "data" + record_files(GZIP).suffix), options="GZIP") as writer:
        for path, label in items:
            raw = tf.io.read_file(path)
            shape = _decode_shape(tf, raw, path)
            example = _make_example(tf, DEFAULT_IMAGE_KEYS, raw.numpy(), shape, path, label, ids[label])
            writer.write(example.SerializeToString())
            written += 1
    return {"work_s": time.perf_counter() - t0, "written": written}


def worker_plain_beam(items, dest) -> dict:
    """A plain Beam pipeline on the DirectRunner with its default options and Beam's own GZIP."""
    import apache_beam as beam
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

    from core.contract.features import DEFAULT_IMAGE_KEYS
    from core.contract.layout import GZIP, record_files

    importlib.import_module("tensorflow")  # before the clock starts, as in the other variants

    class ToExample(beam.DoFn):
        def setup(self):
            import tensorflow

            self.tf = tensorflow

        def process(self, item):
            path, label, label_id = item
            with FileSystems.open(path) as f:
                raw = f.read()
            shape = _decode_shape(self.tf, raw, path)
            yield _make_example(self.tf, DEFAULT_IMAGE_KEYS, raw, shape, path, label, label_id).SerializeToString()

    t0 = time.perf_counter()
    ids = _label_ids(items)
    elements = [(path, label, ids[label]) for path, label in items]
    options = PipelineOptions(["--runner=DirectRunner"])
    with beam.Pipeline(options=options) as p:
        _ = (
            p
            | "Paths" >> beam.Create(elements)
            | "Spread" >> beam.Reshuffle()
            | "ToExample" >> beam.ParDo(ToExample())
            | "Gather" >> beam.Reshuffle()
            | "Write"
            >> beam.io.WriteToTFRecord(
                os.path.join(dest, "part"),
                compression_type=CompressionTypes.GZIP,
                num_shards=PLAIN_BEAM_SHARDS,
                file_name_suffix=record_files(GZIP).suffix,
            )
        )
    return {"work_s": time.perf_counter() - t0}


def _floor_settings(items, compression: str):
    """The conversion settings of a default pipeline run on `items` (the labels sorted, as planned)."""
    from core.contract.features import DEFAULT_IMAGE_KEYS
    from transforms.image_check import DEFAULT_MAX_PIXELS
    from transforms.image_convert import ImageSettings

    labels = tuple(sorted({label for _, label in items}))
    return ImageSettings(labels, dict(DEFAULT_IMAGE_KEYS), DEFAULT_MAX_PIXELS, compression=compression)


def floor_chunk(task: tuple[int, list], settings, dest: str) -> dict:
    """A pool task: one chunk's Sources converted as the pipeline converts them
    (transforms.image_convert: read, check, Example, TFRecord framing, GZIP pieces) into GZIP files
    of its own in `dest` (a conversion's output has to land in files: the page cache's cost is part
    of the necessary work): the pieces in one, records worth deflating (which the pipeline's
    bundle writes as one stream per shard) as one stream in another; its tally of records, errors
    and GZIP bytes."""
    from core.contract.layout import record_files
    from core.tfrecord_framing import framed
    from transforms.gzip_choice import CODEC
    from transforms.gzip_pieces import HEADER, Piece, PieceLedger, closing
    from transforms.image_convert import ImageConverter
    from transforms.outcomes import Record, Written

    index, chunk = task
    suffix = record_files(settings.compression).suffix
    path = os.path.join(dest, f"floor-{index:05d}{suffix}")
    with open(path, "wb") as f:
        f.write(HEADER)
    converter, ledger = ImageConverter(settings), PieceLedger(path, len(HEADER))
    deflated, stream = [], CODEC.compressobj(CODEC.Z_DEFAULT_COMPRESSION, CODEC.DEFLATED, CODEC.MAX_WBITS | 16)
    tally = {"records": 0, "errors": 0}
    for source in chunk:
        outcome, _ = converter.convert(source, path)
        if isinstance(outcome, Written):
            ledger.add(Piece(*outcome.piece))
        elif isinstance(outcome, Record):
            deflated += [stream.compress(piece) for piece in framed(outcome.data)]
        else:
            tally["errors"] += 1
            continue
        tally["records"] += 1
    converter.release()
    with open(path, "ab") as f:
        f.write(closing(ledger.crc, ledger.size))
    paths = [path]
    if deflated:
        paths.append(os.path.join(dest, f"floor-deflated-{index:05d}{suffix}"))
        with open(paths[-1], "wb") as f:
            f.writelines([*deflated, stream.flush()])
    return {**tally, "compressed_bytes": sum(os.path.getsize(p) for p in paths)}


def worker_floor(items, corpus: str, dest: str) -> dict:
    """The necessary work, in plain processes: per image, what the pipeline must do and nothing else
    (read, integrity check, Example, TFRecord framing, GZIP, writing it to a file in `dest`: the
    pipeline's own conversion, floor_chunk), on one process per CPU this process may run on, each
    given contiguous chunks of files. It imports only the modules that do that work (no Beam), so
    its wall-clock time is the start-up a plain script pays."""
    import functools
    import multiprocessing

    from core.contract.layout import GZIP
    from transforms.convert_pool import usable_cores
    from transforms.outcomes import Source

    root = os.path.abspath(corpus)
    sources = [Source(path, os.path.relpath(path, root), label, "train") for path, label in items]
    processes = usable_cores()
    size = max(1, -(-len(sources) // (processes * FLOOR_CHUNKS_PER_PROCESS)))
    chunks = [sources[i : i + size] for i in range(0, len(sources), size)]
    task = functools.partial(floor_chunk, settings=_floor_settings(items, GZIP), dest=dest)
    os.makedirs(dest, exist_ok=True)
    t0 = time.perf_counter()
    # Processes started by a fresh server, not forked from this one: a fork copies only the thread
    # that forks, so a lock another thread held (TensorFlow's, Beam's, where a test process has run
    # them) stays held in the child, which waits on it forever.
    with multiprocessing.get_context("forkserver").Pool(processes) as pool:
        tallies = list(pool.imap_unordered(task, enumerate(chunks)))
    result = {key: sum(t[key] for t in tallies) for key in ("records", "errors", "compressed_bytes")}
    return {"work_s": time.perf_counter() - t0, "processes": processes, **result}


def worker_runner_only(items, corpus: str, dest: str) -> dict:
    """The pipeline (`python -m pipeline`, default settings) with ReadImages' per-source work (read,
    check, Example) replaced by one ready Example, the corpus' first image's, for every source:
    what a run costs besides the per-image work (Beam's runner, framing, GZIP, writing the shards,
    the read-back). Its output is a verified dataset of that one record, repeated. The conversion
    runs in the pipeline's own process (`image.local_processes: 0`, as on one core), where the
    replacement applies."""
    from core.contract.layout import UNCOMPRESSED
    from pipeline.cli import main
    from transforms import image_convert
    from transforms.outcomes import Record, Source

    path, label = items[0]
    first = Source(path, path, label, "train")
    (example, _) = image_convert.ImageConverter(_floor_settings(items, UNCOMPRESSED)).convert(first)

    def ready(_, source):
        return Record(source.split, source.label, False, example.data), len(example.data)

    image_convert.ImageConverter._record = ready
    config = os.path.join(os.path.dirname(os.path.abspath(dest)), "runner_only.yaml")
    pathlib.Path(config).write_text("image: {local_processes: 0}\n", encoding="utf-8")
    t0 = time.perf_counter()
    if main(["--input", corpus, "--output", dest, "--overwrite", "--config", config]) != 0:
        raise SystemExit("the pipeline failed")
    return {"work_s": time.perf_counter() - t0}


def _read_text(path: str) -> str | None:
    return pathlib.Path(path).read_text(encoding="utf-8") if os.path.exists(path) else None


def _output_files(dest: str, result: dict) -> list[str]:
    """The record files of an output folder: the shards its manifest lists (whose counts go into
    `result`) or, without a manifest (the script variants write none), every record file in it."""
    from core.contract.layout import GZIP, join, record_files
    from core.contract.manifest import ManifestNotFoundError, read_manifest

    try:
        manifest = read_manifest(dest, _read_text)
    except ManifestNotFoundError:
        return sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(dest)
            for name in names
            if name.endswith(record_files(GZIP).suffix)
        )
    result["manifest_records"] = manifest.records
    result["compression_type"] = manifest.tf_compression_type
    result["manifest_counts"] = dataclasses.asdict(manifest.counts)
    return [join(dest, shard) for split in manifest.splits.values() for shard in split.shards]


def worker_count(dest) -> dict:
    """Counts the records of a variant's output folder (untimed verification)."""
    import tensorflow as tf

    result: dict = {}
    files = _output_files(dest, result)
    records = 0
    keys: list[str] = []
    for path in files:
        compression = result.get("compression_type", "GZIP")  # the script variants write GZIP
        for raw in tf.data.TFRecordDataset(path, compression_type=compression).as_numpy_iterator():
            if not keys:
                keys = sorted(tf.train.Example.FromString(raw).features.feature)
            records += 1
    result.update(records=records, files=len(files), bytes=sum(os.path.getsize(p) for p in files), keys=keys)
    return result


def run_worker(args) -> int:
    """Runs `args.worker` and prints its result as one tagged JSON line for the driver."""
    if args.worker == "count":
        result = worker_count(args.dest)
    else:
        items = list_corpus(args.corpus, tuple(args.extensions.split(",")))
        if args.worker in FLOOR_VARIANTS:
            result = worker_floor(items, args.corpus, args.dest)
        elif args.worker == "runner_1core":
            result = worker_runner_only(items, args.corpus, args.dest)
        else:
            result = {"serial_tf": worker_serial_tf, "plain_beam": worker_plain_beam}[args.worker](items, args.dest)
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0
