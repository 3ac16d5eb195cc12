#!/usr/bin/env python3
"""Generate the small sample dataset bundled with the repository (deterministic, seeded).

Usage::

    python scripts/make_sample.py [--out sample/] [--seed 1234] [--per-class 120] [--rows 1500]

Layout written under ``--out`` (default ``sample/``)::

    images/<label>/NNNN.jpg|png   3 classes (circle, square, triangle), --per-class images each (120):
                                  64x64 RGB, one filled shape of random colour, size, position and
                                  rotation on a noisy random background; ~70% JPEG (quality 90),
                                  ~30% PNG; 5% of each class (6 files) are single-channel grayscale (mode L).
    images.csv                    AutoML-style CSV with header ``split,image_uri,label`` listing every
                                  image once, URIs relative to the CSV's folder
                                  (``images/circle/0001.jpg``); split is TRAIN / VALIDATION / TEST
                                  (about 70/15/15 of the assigned rows) and UNASSIGNED for ~10%.
    tabular/part-000.csv          Tabular classification data split across three files with the same
    tabular/part-001.csv          header (the last one gzip-compressed), --rows rows in all (1500):
    tabular/part-002.csv.gz           id,x1,x2,x3,count,category,flag,label
                                  id        unique integer (1..rows)
                                  x1,x2,x3  floats (x3 is pure noise)
                                  count     non-negative integer
                                  category  one of alpha, beta, gamma, delta
                                  flag      true / false
                                  label     0, 1 or 2: the tercile of
                                            x1 + 0.8*x2 + 0.15*count + category offset
                                            + 0.5*flag, with ~5% of labels replaced at random
                                  Every non-label column except id has a few empty cells (missing
                                  values); label and id are never empty.

The generator owns ``images/``, ``images.csv`` and ``tabular/`` under ``--out``: it deletes and
rewrites them on every run (anything else in ``--out`` is left alone), so re-running it with the same
arguments reproduces the same files byte for byte (given the same Pillow / libjpeg / zlib builds).
Total size with the defaults is about 1.3 MB.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import logging
import math
import os
import shutil
import sys

import numpy as np
from PIL import Image, ImageDraw

log = logging.getLogger("make_sample")

CLASSES = ("circle", "square", "triangle")
IMAGE_SIZE = 64
SUPERSAMPLE = 4  # draw shapes at 4x and downsample, for anti-aliased edges
JPEG_FRACTION = 0.7
JPEG_QUALITY = 90
GRAYSCALE_FRACTION = 0.05
UNASSIGNED_FRACTION = 0.10
SPLIT_WEIGHTS = (("TRAIN", 0.70), ("VALIDATION", 0.15), ("TEST", 0.15))

TABULAR_HEADER = ("id", "x1", "x2", "x3", "count", "category", "flag", "label")
CATEGORIES = ("alpha", "beta", "gamma", "delta")
CATEGORY_OFFSET = {"alpha": -0.6, "beta": 0.0, "gamma": 0.3, "delta": 0.8}
TABULAR_FILES = ("part-000.csv", "part-001.csv", "part-002.csv.gz")
MISSING_RATE = 0.03  # per nullable cell
LABEL_NOISE = 0.05


# ----------------------------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------------------------


def _background(rng: np.random.Generator) -> np.ndarray:
    """A random base colour, a smooth linear gradient and mild per-pixel noise (float HxWx3)."""
    base = rng.uniform(30, 225, size=3)
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE] / (IMAGE_SIZE - 1) - 0.5
    angle = rng.uniform(0, 2 * math.pi)
    ramp = (np.cos(angle) * xx + np.sin(angle) * yy)[..., None]
    gradient = ramp * rng.uniform(-50, 50, size=3)
    noise = rng.normal(0, rng.uniform(3, 8), size=(IMAGE_SIZE, IMAGE_SIZE, 3))
    return base + gradient + noise


LUMA = np.array([0.299, 0.587, 0.114])  # ITU-R 601-2, as Pillow's convert("L")


def _shape_colour(rng: np.random.Generator, background_mean: np.ndarray, grayscale: bool) -> tuple[int, int, int]:
    """A random colour far enough from the background's mean colour to be visible (in luminance
    too when the image will be stored as grayscale)."""
    for _ in range(200):
        colour = rng.integers(0, 256, size=3)
        if np.linalg.norm(colour - background_mean) > 120 and (
            not grayscale or abs(LUMA @ (colour - background_mean)) > 60
        ):
            break
    return tuple(int(c) for c in colour)


def _shape_polygon(kind: str, cx: float, cy: float, radius: float, angle: float) -> list[tuple[float, float]]:
    if kind == "square":
        corners = 4
        r = radius  # circumradius: side = r * sqrt(2)
        start = angle + math.pi / 4
    elif kind == "triangle":
        corners = 3
        r = radius * 1.1  # equilateral triangles look small for the same circumradius
        start = angle - math.pi / 2
    else:
        raise ValueError(kind)
    return [
        (cx + r * math.cos(start + 2 * math.pi * k / corners), cy + r * math.sin(start + 2 * math.pi * k / corners))
        for k in range(corners)
    ]


def make_shape_image(kind: str, rng: np.random.Generator, grayscale: bool = False) -> Image.Image:
    """One 64x64 image with a single filled `kind` shape: RGB, or mode L when `grayscale`."""
    background = _background(rng)
    colour = _shape_colour(rng, background.mean(axis=(0, 1)), grayscale)

    radius = rng.uniform(0.17, 0.36) * IMAGE_SIZE
    margin = radius + 2
    cx = rng.uniform(margin, IMAGE_SIZE - margin)
    cy = rng.uniform(margin, IMAGE_SIZE - margin)
    angle = rng.uniform(0, 2 * math.pi)

    big = IMAGE_SIZE * SUPERSAMPLE
    mask = Image.new("L", (big, big), 0)
    draw = ImageDraw.Draw(mask)
    s = SUPERSAMPLE
    if kind == "circle":
        draw.ellipse([(cx - radius) * s, (cy - radius) * s, (cx + radius) * s, (cy + radius) * s], fill=255)
    else:
        draw.polygon([(x * s, y * s) for x, y in _shape_polygon(kind, cx, cy, radius, angle)], fill=255)
    alpha = np.asarray(mask.resize((IMAGE_SIZE, IMAGE_SIZE), Image.Resampling.LANCZOS), dtype=np.float64)[..., None]
    alpha /= 255.0

    # The shape gets a little shading noise of its own, so it is not a flat colour.
    shape = np.asarray(colour, dtype=np.float64) + rng.normal(0, 4, size=(IMAGE_SIZE, IMAGE_SIZE, 3))
    pixels = alpha * shape + (1 - alpha) * background
    image = Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8), mode="RGB")
    return image.convert("L") if grayscale else image


def _encode(image: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "jpg":
        image.save(buf, format="JPEG", quality=JPEG_QUALITY)
    else:
        image.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _pick_split(rng: np.random.Generator) -> str:
    if rng.random() < UNASSIGNED_FRACTION:
        return "UNASSIGNED"
    names = [name for name, _ in SPLIT_WEIGHTS]
    weights = np.array([w for _, w in SPLIT_WEIGHTS])
    return str(rng.choice(names, p=weights / weights.sum()))


def write_images(out: str, per_class: int, rng: np.random.Generator) -> list[tuple[str, str, str]]:
    """Writes images/<class>/NNNN.{jpg,png}; returns (split, relative uri, label) rows."""
    rows = []
    for kind in CLASSES:
        folder = os.path.join(out, "images", kind)
        os.makedirs(folder, exist_ok=True)
        n_gray = max(1, round(per_class * GRAYSCALE_FRACTION))
        gray = set((rng.choice(per_class, size=min(n_gray, per_class), replace=False) + 1).tolist())
        for i in range(1, per_class + 1):
            grayscale = i in gray
            image = make_shape_image(kind, rng, grayscale)
            fmt = "jpg" if rng.random() < JPEG_FRACTION else "png"
            name = f"{i:04d}.{fmt}"
            with open(os.path.join(folder, name), "wb") as f:
                f.write(_encode(image, fmt))
            rows.append((_pick_split(rng), f"images/{kind}/{name}", kind))
    return rows


def write_images_csv(out: str, rows: list[tuple[str, str, str]], rng: np.random.Generator) -> None:
    order = rng.permutation(len(rows))  # not grouped by class, like a real export
    with open(os.path.join(out, "images.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("split", "image_uri", "label"))
        for i in order:
            writer.writerow(rows[i])


# ----------------------------------------------------------------------------------------------
# Tabular
# ----------------------------------------------------------------------------------------------


def make_tabular_rows(n: int, rng: np.random.Generator) -> list[list[str]]:
    x1 = rng.normal(0.0, 1.0, n)
    x2 = rng.normal(0.5, 1.5, n)
    x3 = rng.uniform(-1.0, 1.0, n)  # irrelevant feature
    count = rng.poisson(3.0, n)
    category = rng.choice(CATEGORIES, size=n, p=(0.35, 0.3, 0.2, 0.15))
    flag = rng.random(n) < 0.4

    score = x1 + 0.8 * x2 + 0.15 * count + np.array([CATEGORY_OFFSET[c] for c in category]) + 0.5 * flag
    t1, t2 = np.quantile(score, [1 / 3, 2 / 3])
    label = np.where(score < t1, 0, np.where(score < t2, 1, 2))
    noisy = rng.random(n) < LABEL_NOISE
    label = np.where(noisy, rng.integers(0, 3, n), label)

    rows = []
    for i in range(n):
        row = [
            str(i + 1),
            f"{x1[i]:.4f}",
            f"{x2[i]:.4f}",
            f"{x3[i]:.4f}",
            str(int(count[i])),
            str(category[i]),
            "true" if flag[i] else "false",
            str(int(label[i])),
        ]
        # Missing values in every non-label column except the id.
        for col in range(1, len(row) - 1):
            if rng.random() < MISSING_RATE:
                row[col] = ""
        rows.append(row)
    return rows


def _csv_text(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(TABULAR_HEADER)
    writer.writerows(rows)
    return buf.getvalue()


def write_tabular(out: str, n_rows: int, rng: np.random.Generator) -> None:
    folder = os.path.join(out, "tabular")
    os.makedirs(folder, exist_ok=True)
    rows = make_tabular_rows(n_rows, rng)
    bounds = np.linspace(0, n_rows, len(TABULAR_FILES) + 1).astype(int)
    for name, lo, hi in zip(TABULAR_FILES, bounds[:-1], bounds[1:], strict=True):
        data = _csv_text(rows[lo:hi]).encode("utf-8")
        path = os.path.join(folder, name)
        if name.endswith(".gz"):
            # mtime=0 and no embedded file name keep the output byte-for-byte reproducible.
            with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                gz.write(data)
        else:
            with open(path, "wb") as f:
                f.write(data)
        log.info("wrote %s (%d rows)", path, hi - lo)


# ----------------------------------------------------------------------------------------------


def _tree_size(path: str) -> tuple[int, int]:
    files = total = 0
    for root, _, names in os.walk(path):
        for name in names:
            files += 1
            total += os.path.getsize(os.path.join(root, name))
    return files, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="sample/", help="output folder (default: sample/)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--per-class", type=int, default=120, help="images per class (default: 120)")
    parser.add_argument("--rows", type=int, default=1500, help="tabular rows in all (default: 1500)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    out = args.out
    os.makedirs(out, exist_ok=True)
    for owned in ("images", "tabular"):
        shutil.rmtree(os.path.join(out, owned), ignore_errors=True)

    # Independent streams, so changing one part's size does not change the others.
    image_rng, csv_rng, tab_rng = (np.random.default_rng([args.seed, k]) for k in range(3))
    rows = write_images(out, args.per_class, image_rng)
    write_images_csv(out, rows, csv_rng)
    splits = {}
    for split, _, _ in rows:
        splits[split] = splits.get(split, 0) + 1
    log.info(
        "wrote %d images in %d classes; images.csv splits: %s", len(rows), len(CLASSES), dict(sorted(splits.items()))
    )
    write_tabular(out, args.rows, tab_rng)

    files, total = _tree_size(out)
    log.info("%s: %d files, %.2f MB", out, files, total / 1e6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
