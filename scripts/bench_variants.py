"""The script variants the pipeline is compared with, each run by `benchmark.py --worker VARIANT` in
its own timed subprocess, and the untimed `count` worker that checks an output folder.

A subprocess' wall-clock time includes its imports, so each worker imports what its variant needs
inside its own function: the `floor` variant stays on the standard library. The project modules
imported here (pipeline.contract) use neither Beam nor TensorFlow.
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
from bench_settings import RESULT_TAG

# The plain Beam variant's shard count: a fixed, typical choice, not planned from the input.
PLAIN_BEAM_SHARDS = 8


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

    from pipeline.contract.features import DEFAULT_IMAGE_KEYS
    from pipeline.contract.layout import GZIP, record_files

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

    from pipeline.contract.features import DEFAULT_IMAGE_KEYS
    from pipeline.contract.layout import GZIP, record_files

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


def _gzip_size(path: str) -> int:
    import gzip

    with open(path, "rb") as f:
        return len(gzip.compress(f.read(), compresslevel=6, mtime=0))


def worker_floor(items, dest) -> dict:
    """Reads and gzip-compresses every file on every core, discarding the output: roughly the least
    work any converter that compresses with the stdlib's zlib must do."""
    import multiprocessing

    t0 = time.perf_counter()
    processes = os.cpu_count() or 1
    with multiprocessing.Pool(processes) as pool:
        compressed = sum(pool.imap_unordered(_gzip_size, [path for path, _ in items], chunksize=16))
    return {"work_s": time.perf_counter() - t0, "compressed_bytes": compressed, "processes": processes}


def _read_text(path: str) -> str | None:
    return pathlib.Path(path).read_text(encoding="utf-8") if os.path.exists(path) else None


def _output_files(dest: str, result: dict) -> list[str]:
    """The record files of an output folder: the shards its manifest lists (whose counts go into
    `result`) or, without a manifest (the script variants write none), every record file in it."""
    from pipeline.contract.layout import GZIP, join, record_files
    from pipeline.contract.manifest import ManifestNotFoundError, read_manifest

    try:
        manifest = read_manifest(dest, _read_text)
    except ManifestNotFoundError:
        return sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(dest)
            for name in names
            if name.endswith(record_files(GZIP).suffix)
        )
    result["manifest_records"] = sum(split.records for split in manifest.splits.values())
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
        fn = {"serial_tf": worker_serial_tf, "plain_beam": worker_plain_beam, "floor": worker_floor}[args.worker]
        result = fn(items, args.dest)
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0
