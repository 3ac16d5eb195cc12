"""Per-image costs inside the pipeline, each next to its cheaper or former alternative where there is
one, timed in the driver on one thread: what a run's wall-clock time cannot separate. Timed in the
thread's CPU time, as the pipeline's CPU time per image they are set against, so that other
processes on the machine do not inflate them."""

from __future__ import annotations

import io
import os
import statistics
import tempfile
import time
import zlib

from isal import isal_zlib
from PIL import Image

from core.tfrecord_framing import framed
from pipeline.config import ImageConfig
from pipeline.tfrecord_reader import read_records
from transforms.gzip_choice import CODEC, STORED
from transforms.image_check import check_image
from transforms.same_content import content_digest


def _per_image_us(fn, blobs: list[bytes], runs: int) -> float:
    """Median over `runs` passes of `fn`'s CPU time per blob, in microseconds."""
    timings = []
    for _ in range(runs):
        started = time.thread_time()
        for blob in blobs:
            fn(blob)
        timings.append(1e6 * (time.thread_time() - started) / len(blobs))
    return statistics.median(timings)


def _gzip_with(codec, level=None):
    """Gzip of one payload as Beam's CompressedFile deflates it, through `codec` (a zlib API), at
    `level` (None: the codec's default)."""

    def compress(blob):
        compressor = codec.compressobj(
            codec.Z_DEFAULT_COMPRESSION if level is None else level, codec.DEFLATED, codec.MAX_WBITS | 16
        )
        return compressor.compress(blob) + compressor.flush()

    return compress


def _read_back_us(blobs: list[bytes], runs: int) -> float:
    """Median over `runs` passes of the job's read-back (pipeline.readback: GZIP, framing, both
    CRCs) per record, over one GZIP TFRecord shard of the blobs on local disk, written through the
    pipeline's codec (transforms.gzip_choice)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "shard.tfrecord.gz")
        records = b"".join(piece for b in blobs for piece in framed(b))
        with open(path, "wb") as f:
            f.write(_gzip_with(CODEC)(records))
        return statistics.median(_timed_read(path, len(blobs)) for _ in range(runs))


def _timed_read(path: str, records: int) -> float:
    started = time.thread_time()
    assert sum(1 for _ in read_records(path, inside=None)) == records
    return 1e6 * (time.thread_time() - started) / records


def measure_per_image_costs(items: list[tuple[str, str]], runs: int) -> dict:
    """Per image, median over `runs` passes:

    * the integrity check (transforms.image_check.check_image: header dimensions, then a 1/8-scale
      draft decode for JPEG that still reads all the data), with the pipeline's default pixel
      limit, against reading the dimensions from the header alone;
    * GZIP of the payload as stored blocks, as the pipeline writes payloads that do not compress
      (transforms.gzip_choice), through ISA-L, as it writes those that do, and through the stdlib
      zlib at the level Beam uses by default;
    * the digest of each source, to find copies (transforms.same_content);
    * the read-back of the written record before publishing."""
    blobs = []
    for path, _ in items:
        with open(path, "rb") as f:
            blobs.append(f.read())
    max_pixels = ImageConfig().max_pixels
    return {
        "header_only_us": _per_image_us(lambda b: Image.open(io.BytesIO(b)).size, blobs, runs),
        "check_image_us": _per_image_us(lambda b: check_image(b, max_pixels), blobs, runs),
        "gzip_zlib_us": _per_image_us(_gzip_with(zlib), blobs, runs),
        "gzip_isal_us": _per_image_us(_gzip_with(isal_zlib), blobs, runs),
        "gzip_stored_us": _per_image_us(_gzip_with(zlib, STORED), blobs, runs),
        "content_digest_us": _per_image_us(content_digest, blobs, runs),
        "read_back_us": _read_back_us(blobs, runs),
    }
