#!/usr/bin/env python3
"""Build the benchmark corpus of real photographs from the photos bundled with scikit-image.

Usage::

    python scripts/make_photo_corpus.py [--out bench/photos] [--count 2000] [--seed 20240601] [--long_side N]

The sources are the colour photographs shipped inside the scikit-image package itself (read straight
from the package's ``skimage/data`` folder, so nothing is ever downloaded): astronaut, chelsea,
coffee, rocket, the two stereo motorcycle views, immunohistochemistry, hubble_deep_field and retina.
They are grouped into 5 class folders::

    bench/photos/astronaut/000000.jpg ...   astronaut
    bench/photos/cat/...                    chelsea
    bench/photos/coffee/...                 coffee
    bench/photos/vehicle/...                rocket, motorcycle_left, motorcycle_right
    bench/photos/science/...                immunohistochemistry, hubble_deep_field, retina

Each file is a random crop (random area and aspect ratio) of one source, optionally mirrored, with
mild brightness/contrast/colour jitter and a little sensor-like noise, rescaled to a random size
(long side 384-832 px; 15% of the files 1024-1600 px; or all of them ``--long_side`` px, 4032 for
camera-sized photos of 12 Mpixels) and saved as an optimized JPEG of quality
85-95 (10% progressive). With the defaults this gives ~2,000 files, ~150-300 MB in all, median
~60-90 kB, much like a folder of camera photos that were resized for the web. The corpus is
deterministic: file ``i`` depends only on ``--seed`` and ``i``, so ``--count`` only adds or drops
files, and the files are built in a process pool.

``--out`` (``bench/`` is git-ignored) is wiped of previously generated class folders first.
"""

from __future__ import annotations

import argparse
import io
import logging
import multiprocessing
import os
import shutil
import statistics
import sys

import numpy as np
from PIL import Image, ImageEnhance

log = logging.getLogger("make_photo_corpus")

# class -> bundled files (inside skimage/data) it draws from.
CLASSES: dict[str, tuple[str, ...]] = {
    "astronaut": ("astronaut.png",),
    "cat": ("chelsea.png",),
    "coffee": ("coffee.png",),
    "vehicle": ("rocket.jpg", "motorcycle_left.png", "motorcycle_right.png"),
    "science": ("ihc.png", "hubble_deep_field.jpg", "retina.jpg"),
}

_SOURCES: dict[str, Image.Image] = {}


def _skimage_data_dir() -> str:
    try:
        import skimage.data  # only to locate the package folder; no fetching
    except ImportError as e:
        raise SystemExit(f"the photo corpus needs scikit-image ({e}): pip install -e '.[bench]'") from e
    return os.path.dirname(skimage.data.__file__)


def _load_sources() -> dict[str, Image.Image]:
    folder = _skimage_data_dir()
    images = {}
    for names in CLASSES.values():
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path} is not bundled with this scikit-image install")
            with Image.open(path) as im:
                images[name] = im.convert("RGB")
    return images


def _init_worker() -> None:
    global _SOURCES
    _SOURCES = _load_sources()


def _target_long_side(rng: np.random.Generator) -> int:
    if rng.random() < 0.15:
        return int(rng.integers(1024, 1601))  # a few large ones: the long tail of a real folder
    return int(rng.integers(384, 833))


def make_photo(index: int, seed: int, long_side: int | None = None) -> tuple[str, bytes]:
    """Returns (relative path, JPEG bytes) of corpus file `index`: of the web-sized mix, or with
    every long side `long_side` px (camera-sized photos: 4032)."""
    rng = np.random.default_rng([seed, index])
    classes = sorted(CLASSES)
    label = classes[index % len(classes)]
    source_name = CLASSES[label][int(rng.integers(len(CLASSES[label])))]
    src = _SOURCES[source_name]
    w, h = src.size

    # Random crop: 30-100% of the area, aspect ratio 3:4 .. 16:9 (either orientation).
    area = rng.uniform(0.3, 1.0) * w * h
    aspect = float(np.exp(rng.uniform(np.log(3 / 4), np.log(16 / 9))))
    if rng.random() < 0.5:
        aspect = 1 / aspect
    cw = int(min(w, round(np.sqrt(area * aspect))))
    ch = int(min(h, round(np.sqrt(area / aspect))))
    x0 = int(rng.integers(0, w - cw + 1))
    y0 = int(rng.integers(0, h - ch + 1))
    image = src.crop((x0, y0, x0 + cw, y0 + ch))
    if rng.random() < 0.5:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)

    long_side = long_side or _target_long_side(rng)
    scale = long_side / max(cw, ch)
    size = (max(1, round(cw * scale)), max(1, round(ch * scale)))
    image = image.resize(size, Image.Resampling.BICUBIC)

    image = ImageEnhance.Brightness(image).enhance(rng.uniform(0.85, 1.15))
    image = ImageEnhance.Contrast(image).enhance(rng.uniform(0.85, 1.2))
    image = ImageEnhance.Color(image).enhance(rng.uniform(0.8, 1.2))

    # Upscaled crops are too smooth to compress like camera output; add sensor-like noise.
    pixels = np.asarray(image, dtype=np.float32)
    pixels += rng.normal(0.0, rng.uniform(1.0, 3.0), size=pixels.shape).astype(np.float32)
    image = Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8), mode="RGB")

    buf = io.BytesIO()
    image.save(
        buf,
        format="JPEG",
        quality=int(rng.integers(85, 96)),
        progressive=bool(rng.random() < 0.1),
        optimize=True,
    )
    return f"{label}/{index:06d}.jpg", buf.getvalue()


def _build_one(job: tuple[int, int, str, int | None]) -> int:
    index, seed, out, long_side = job
    rel, data = make_photo(index, seed, long_side)
    with open(os.path.join(out, rel), "wb") as f:
        f.write(data)
    return len(data)


def build(out: str, count: int, seed: int, processes: int | None = None, long_side: int | None = None) -> list[int]:
    """Writes the corpus; returns the file sizes in bytes."""
    _skimage_data_dir()  # here, not first in the pool's workers, whose crashes the pool would only restart
    for label in CLASSES:
        shutil.rmtree(os.path.join(out, label), ignore_errors=True)
        os.makedirs(os.path.join(out, label), exist_ok=True)
    jobs = [(i, seed, out, long_side) for i in range(count)]
    processes = processes or os.cpu_count() or 1
    with multiprocessing.Pool(processes, initializer=_init_worker) as pool:
        sizes = []
        for n, size in enumerate(pool.imap(_build_one, jobs, chunksize=8), start=1):
            sizes.append(size)
            if n % 250 == 0 or n == count:
                log.info("%d/%d files", n, count)
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/photos", help="output folder (default: bench/photos)")
    parser.add_argument("--count", type=int, default=2000, help="number of JPEG files (default: 2000)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--processes", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument(
        "--long_side", type=int, default=None, help="every photo this long on its long side, e.g. 4032 (camera-sized)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    sizes = build(args.out, args.count, args.seed, args.processes, args.long_side)
    log.info(
        "%s: %d files in %d classes, %.1f MB in all, median %.1f kB (min %.1f kB, max %.1f kB)",
        args.out,
        len(sizes),
        len(CLASSES),
        sum(sizes) / 1e6,
        statistics.median(sizes) / 1e3 if sizes else 0.0,
        min(sizes, default=0) / 1e3,
        max(sizes, default=0) / 1e3,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
