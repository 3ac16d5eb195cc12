"""Two per-image costs inside the pipeline, each next to its cheaper or former alternative, timed in
the driver on one thread with the bytes in memory: what a run's wall-clock time cannot separate."""

from __future__ import annotations

import io
import statistics
import time
import zlib

from isal import isal_zlib
from PIL import Image

from pipeline.config import ImageConfig
from transforms.image_check import check_image


def _per_image_us(fn, blobs: list[bytes], runs: int) -> float:
    """Median over `runs` passes of `fn`'s time per blob, in microseconds."""
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        for blob in blobs:
            fn(blob)
        timings.append(1e6 * (time.perf_counter() - started) / len(blobs))
    return statistics.median(timings)


def _gzip_with(codec):
    """Gzip of one payload as Beam's CompressedFile deflates it, through `codec` (a zlib API)."""

    def compress(blob):
        compressor = codec.compressobj(codec.Z_DEFAULT_COMPRESSION, codec.DEFLATED, codec.MAX_WBITS | 16)
        return compressor.compress(blob) + compressor.flush()

    return compress


def measure_per_image_costs(items: list[tuple[str, str]], runs: int) -> dict:
    """Per image, median over `runs` passes:

    * the integrity check (transforms.image_check.check_image: header dimensions, then a 1/8-scale
      draft decode for JPEG that still reads all the data), with the pipeline's default pixel
      limit, against reading the dimensions from the header alone;
    * GZIP of the payload through ISA-L, as the pipeline does (transforms.gzip_codec), against the
      stdlib zlib Beam uses by default."""
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
    }
