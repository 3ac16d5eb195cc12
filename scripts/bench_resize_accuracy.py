#!/usr/bin/env python3
"""Whether storing images at training size costs accuracy: the same small training task on a
dataset converted as it is and converted with ``image.resize: {shorter_side: 256}``, over seeds.

Usage::

    python scripts/bench_resize_accuracy.py [--folder bench/resize_accuracy] [--count 1200]
                                            [--seeds 1,2,3] [--epochs 8] [--image_size 64]
                                            [--json out.json] [--docs docs/performance.md]

The task is generated (Pillow and numpy only, deterministic: photo ``i`` depends only on
``--corpus_seed`` and ``i``): class folders of JPEG photos of quality 90, 600-1600 px on the longer
side (360 px or more on the shorter), each a blotchy, grainy backdrop with a few small clutter
shapes of every kind and one large shape whose kind is the label (circle, cross, square or
triangle), at a random place, size (30-50% of the shorter side), rotation and colour. At 256 px
on the shorter side the large shape is 77 px or more across and the clutter 5-15 px: the label is
plain at the stored size (and at the trainer's 64 px, 22 px or more). The shape lies within the
central square the trainer's center crop keeps.

The corpus is converted twice by the real CLI (``python -m pipeline``): as it is, and with a YAML
config the script writes, ``image: {resize: {shorter_side: N}}``. Both conversions split by the
same hash of the file names, so both versions hold the same photos in train and validation. The
trainer (``python -m trainer``) then trains the default ``small_cnn`` on each, on the CPU, with the
same flags and each seed of ``--seeds`` (center crops, flips, ``--image_size``), and the
validation accuracy of its last epoch is read from the run's ``training_summary.json``. The table
gives, per version, each seed's accuracy, the mean and the range; then the difference of the means
against the spread between seeds. ``--docs PATH`` writes it into that page's block
``resize-accuracy`` (bench_docs).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
from bench_docs import check_blocks, invoked_command, markdown_table, write_tables
from bench_settings import REPO_ROOT
from PIL import Image, ImageDraw

DOCS_BLOCK = "resize-accuracy"
CLASSES = ("circle", "cross", "square", "triangle")
JPEG_QUALITY = 90
LONGER_SIDE = (600, 1600)  # px, of every generated photo
SHAPE_FRACTION = (0.3, 0.5)  # the labelled shape's size, of the shorter side
CLUTTER_FRACTION = (0.02, 0.06)  # the clutter shapes' sizes, of the shorter side
BLOTCHES = (8, 20)  # the backdrop's blotches across its shorter side
BACKDROP_CONTRAST = 35  # the most each channel of the blotches' two colours differ
CONTRAST = (80, 130)  # the shapes' distance in RGB from a blend of the backdrop's colours
NOISE = 8  # grain: each channel of each pixel moves up to this many levels
CENTRAL = 0.8  # the labelled shape lies within this central square of the shorter side
VERSIONS = ("as converted", "resized")


# -- the corpus


def _polygon(kind: str, cx: float, cy: float, size: float, angle: float) -> list[tuple[float, float]]:
    """The outline of a shape of `kind` (not a circle), `size` px across, turned by `angle`."""
    r = size / 2
    if kind == "square":
        points = [(-r, -r), (r, -r), (r, r), (-r, r)]
    elif kind == "triangle":
        points = [(r * math.cos(a), r * math.sin(a)) for a in (-math.pi / 2, math.pi / 6, 5 * math.pi / 6)]
    else:  # cross: arms a third of its size wide
        w = r / 3
        points = [
            (-w, -r),
            (w, -r),
            (w, -w),
            (r, -w),
            (r, w),
            (w, w),
            (w, r),
            (-w, r),
            (-w, w),
            (-r, w),
            (-r, -w),
            (-w, -w),
        ]
    cos, sin = math.cos(angle), math.sin(angle)
    return [(cx + x * cos - y * sin, cy + x * sin + y * cos) for x, y in points]


def _draw_shape(draw: ImageDraw.ImageDraw, kind: str, cx: float, cy: float, size: float, angle: float, colour):
    if kind == "circle":
        r = size / 2
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
    else:
        draw.polygon(_polygon(kind, cx, cy, size, angle), fill=colour)


def _background(rng: np.random.Generator, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """A textured backdrop, float32 [H, W, 3]: blotches (BLOTCHES across) blending two colours;
    and those two colours."""
    cells = rng.uniform(*BLOTCHES) / min(width, height)  # blotches per pixel
    coarse = rng.integers(0, 256, (max(2, round(height * cells)), max(2, round(width * cells))), dtype=np.uint8)
    field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BILINEAR), dtype=np.float32)
    low = rng.uniform(50, 205, size=3).astype(np.float32)
    high = low + rng.uniform(-BACKDROP_CONTRAST, BACKDROP_CONTRAST, size=3).astype(np.float32)
    return low + (high - low) * (field[..., None] / 255), np.stack([low, high])


def _colour_near(rng: np.random.Generator, colours: np.ndarray) -> tuple[int, ...]:
    """A colour CONTRAST away (in RGB) from a blend of the backdrop's two."""
    base = colours[0] + (colours[1] - colours[0]) * rng.random()
    step = rng.normal(size=3)
    step *= rng.uniform(*CONTRAST) / np.linalg.norm(step)
    return tuple(int(c) for c in np.clip(base + step, 0, 255))


def make_photo(index: int, corpus_seed: int) -> tuple[str, bytes]:
    """Photo `index` of the corpus: (its label, its JPEG bytes); depends on nothing else."""
    rng = np.random.default_rng([corpus_seed, index])
    label = CLASSES[index % len(CLASSES)]
    longer = int(rng.integers(LONGER_SIDE[0], LONGER_SIDE[1] + 1))
    shorter = int(longer * rng.uniform(0.6, 1.0))
    width, height = (longer, shorter) if rng.random() < 0.6 else (shorter, longer)
    backdrop, colours = _background(rng, width, height)
    image = Image.fromarray(backdrop.astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(4, 12))):  # clutter of every kind, anywhere
        size = shorter * rng.uniform(*CLUTTER_FRACTION)
        kind = CLASSES[int(rng.integers(len(CLASSES)))]
        where = rng.uniform(0, width), rng.uniform(0, height)
        _draw_shape(draw, kind, *where, size, rng.uniform(0, 2 * math.pi), _colour_near(rng, colours))
    size = shorter * rng.uniform(*SHAPE_FRACTION)
    room = (CENTRAL * shorter - size) / 2  # the shape's centre may move this far from the photo's
    cx, cy = width / 2 + rng.uniform(-room, room), height / 2 + rng.uniform(-room, room)
    _draw_shape(draw, label, cx, cy, size, rng.uniform(0, 2 * math.pi), _colour_near(rng, colours))
    noise = rng.integers(-NOISE, NOISE + 1, size=(height, width, 3), dtype=np.int16)  # sensor-like grain
    pixels = np.clip(np.asarray(image, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=JPEG_QUALITY)
    return label, buffer.getvalue()


def _write_photo(job: tuple[int, int, str]) -> int:
    index, corpus_seed, folder = job
    label, data = make_photo(index, corpus_seed)
    with open(os.path.join(folder, label, f"{index:06d}.jpg"), "wb") as f:
        f.write(data)
    return len(data)


def make_corpus(folder: str, count: int, corpus_seed: int, processes: int | None = None) -> int:
    """Writes `count` photos into class folders of `folder` (emptied first); returns their bytes."""
    shutil.rmtree(folder, ignore_errors=True)
    for label in CLASSES:
        os.makedirs(os.path.join(folder, label))
    jobs = [(index, corpus_seed, folder) for index in range(count)]
    with multiprocessing.Pool(processes or os.cpu_count()) as pool:
        return sum(pool.map(_write_photo, jobs, chunksize=8))


# -- the two conversions and the trainings


def _environment() -> dict[str, str]:
    """This checkout first on the path; the trainer on the CPU, without TensorFlow's start-up chatter."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))
    return env


def _run(command: list[str], log: str, what: str) -> float:
    """Runs `command` from the repository root, its output into `log`; returns its seconds. A failure
    stops the script with the log's last lines."""
    start = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(command, cwd=REPO_ROOT, env=_environment(), stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        with open(log) as f:
            last = "".join(f.readlines()[-15:])
        raise SystemExit(f"{what} failed (exit {done.returncode}); the end of {log}:\n{last}")
    return time.monotonic() - start


def resize_config(folder: str, shorter_side: int) -> str:
    """The YAML config of the resized version, written into `folder`; returns its path."""
    path = os.path.join(folder, "resize.yaml")
    with open(path, "w") as f:
        f.write(f"kind: images\nimage:\n  resize: {{shorter_side: {shorter_side}}}\n")
    return path


def convert(photos: str, dest: str, config: str | None) -> dict:
    """Converts `photos` into `dest` with the CLI (and `config`); returns its manifest's splits
    {split: records}, the bytes of its shards and the conversion's seconds."""
    command = [sys.executable, "-m", "pipeline", "--input", photos, "--output", dest, "--overwrite"]
    command += ["--config", config] if config else []
    seconds = _run(command, f"{dest}.log", f"converting {photos} into {dest}")
    with open(os.path.join(dest, "manifest.json")) as f:
        splits = json.load(f)["splits"]
    return {
        "records": {split: info["records"] for split, info in splits.items()},
        "bytes": sum(info["bytes"] for info in splits.values()),
        "seconds": seconds,
    }


def train_flags(args) -> list[str]:
    """The trainer's flags every run shares, but its data, model folder and seed."""
    flags = ["--epochs", str(args.epochs), "--batch_size", str(args.batch_size), "--image_size", str(args.image_size)]
    return flags + ["--train_crop", "center", "--eval_crop", "center", "--no_export", "--log_every_seconds", "600"]


def train(data: str, model_dir: str, seed: int, args) -> dict:
    """One training run on `data`: the validation accuracy of its last epoch and its seconds."""
    shutil.rmtree(model_dir, ignore_errors=True)
    command = [sys.executable, "-m", "trainer", "--data", data, "--model_dir", model_dir, "--seed", str(seed)]
    seconds = _run(command + train_flags(args), f"{model_dir}.log", f"training on {data} (seed {seed})")
    with open(os.path.join(model_dir, "training_summary.json")) as f:
        summary = json.load(f)
    shutil.rmtree(model_dir, ignore_errors=True)
    return {"val_accuracy": summary["val_accuracy"], "val_records": summary["val_records"], "seconds": seconds}


# -- the figures


def summarise(accuracies: dict[str, list[float]]) -> dict:
    """Per version: mean, min, max, standard deviation over the seeds; then the difference of the
    means (resized minus as converted), its standard error, and the run-to-run spread (the widest
    range of one version's seeds). Parity: the difference is within that spread."""
    rows = {}
    for version, values in accuracies.items():
        rows[version] = {
            "mean": statistics.fmean(values),
            "min": min(values),
            "max": max(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        }
    first, second = (rows[version] for version in VERSIONS)
    runs = len(accuracies[VERSIONS[0]])
    difference = second["mean"] - first["mean"]
    spread = max(row["max"] - row["min"] for row in rows.values())
    return {
        "versions": rows,
        "difference": difference,
        "standard_error": math.sqrt((first["stdev"] ** 2 + second["stdev"] ** 2) / runs),
        "spread": spread,
        "parity": abs(difference) <= spread,
    }


def _points(value: float) -> str:
    return f"{100 * value:.1f}"


def table(seeds: list[int], accuracies: dict[str, list[float]], summary: dict, details: dict) -> str:
    """The markdown table and the lines under it."""
    header = ["version", *(f"seed {seed}" for seed in seeds), "mean", "min-max", "std dev", "stored", "train s"]
    rows = []
    for version in VERSIONS:
        row = summary["versions"][version]
        cells = [details["names"][version], *map(_points, accuracies[version]), _points(row["mean"])]
        cells += [f"{_points(row['min'])}-{_points(row['max'])}", _points(row["stdev"])]
        cells += [f"{details['bytes'][version] / 1e6:.1f} MB", f"{details['train_seconds'][version]:.0f}"]
        rows.append(cells)
    paired = [b - a for a, b in zip(*(accuracies[version] for version in VERSIONS), strict=True)]
    rows.append(["difference (resized - as converted)", *(f"{100 * d:+.1f}" for d in paired)] + [""] * 5)
    rows[-1][len(seeds) + 1] = f"{100 * summary['difference']:+.1f}"
    verdict = "within" if summary["parity"] else "OUTSIDE"
    lines = [
        markdown_table(header, rows),
        "",
        f"Validation accuracy in % ({details['val_records']} records), after {details['epochs']} epochs; "
        f"`train s`: median seconds of one training run; {len(seeds) * len(VERSIONS)} runs, "
        f"the photos and both conversions: {details['seconds'] / 60:.1f} minutes in all.",
        f"Difference of the means {100 * summary['difference']:+.1f} points (standard error "
        f"{_points(summary['standard_error'])}); run-to-run spread up to {_points(summary['spread'])} points "
        f"(max-min of one version's seeds): {verdict} the noise.",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--folder",
        default=os.path.join(REPO_ROOT, "bench", "resize_accuracy"),
        help="where the photos and both datasets are written (emptied first)",
    )
    parser.add_argument("--count", type=int, default=1200, help="photos to generate (default 1200)")
    parser.add_argument("--corpus_seed", type=int, default=49, help="seed of the generated photos (default 49)")
    parser.add_argument("--shorter_side", type=int, default=256, help="the resized version's bound (default 256)")
    parser.add_argument("--seeds", default="1,2,3", help="the trainer's --seed of each run, comma-separated")
    parser.add_argument("--epochs", type=int, default=8, help="epochs of each training run (default 8)")
    parser.add_argument("--image_size", type=int, default=64, help="the trainer's --image_size (default 64)")
    parser.add_argument("--batch_size", type=int, default=32, help="the trainer's --batch_size (default 32)")
    parser.add_argument("--json", help="also write every run's figures as JSON to this path")
    parser.add_argument("--docs", help=f"also write the table into this markdown page's block {DOCS_BLOCK}")
    args = parser.parse_args(argv)
    args.seeds = [int(seed) for seed in args.seeds.split(",") if seed]
    if not args.seeds or len(set(args.seeds)) != len(args.seeds):
        parser.error("--seeds: one or more distinct seeds")
    if args.count < 2 * len(CLASSES):
        parser.error(f"--count must be at least {2 * len(CLASSES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.docs:
        check_blocks(args.docs, [DOCS_BLOCK])
    started = time.monotonic()
    folder = os.path.abspath(args.folder)
    os.makedirs(folder, exist_ok=True)
    photos = os.path.join(folder, "photos")
    size = make_corpus(photos, args.count, args.corpus_seed)
    print(f"generated {args.count} photos, {size / 1e6:.0f} MB, in {photos}", file=sys.stderr, flush=True)
    configs = {VERSIONS[0]: None, VERSIONS[1]: resize_config(folder, args.shorter_side)}
    datasets, converted = {}, {}
    for index, version in enumerate(VERSIONS):
        datasets[version] = os.path.join(folder, f"dataset{index}")
        converted[version] = convert(photos, datasets[version], configs[version])
        print(
            f"{version}: {converted[version]['records']}, {converted[version]['bytes'] / 1e6:.1f} MB", file=sys.stderr
        )
    if converted[VERSIONS[0]]["records"] != converted[VERSIONS[1]]["records"]:
        raise SystemExit(f"the two versions split differently: {[c['records'] for c in converted.values()]}")
    runs: dict[str, list[dict]] = {version: [] for version in VERSIONS}
    for seed in args.seeds:  # the versions take turns, so that both see the same load on the machine
        for version in VERSIONS:
            run = train(datasets[version], os.path.join(folder, "model"), seed, args)
            runs[version].append(run)
            print(
                f"  {version}, seed {seed}: validation accuracy {run['val_accuracy']:.3f}, {run['seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    accuracies = {version: [run["val_accuracy"] for run in done] for version, done in runs.items()}
    summary = summarise(accuracies)
    low, high = LONGER_SIDE
    details = {
        "names": {
            VERSIONS[0]: f"as converted ({low}-{high} px on the longer side)",
            VERSIONS[1]: f"resized (`shorter_side: {args.shorter_side}`)",
        },
        "bytes": {version: converted[version]["bytes"] for version in VERSIONS},
        "train_seconds": {version: statistics.median(run["seconds"] for run in runs[version]) for version in VERSIONS},
        "val_records": runs[VERSIONS[0]][0]["val_records"],
        "epochs": args.epochs,
        "seconds": time.monotonic() - started,
    }
    text = table(args.seeds, accuracies, summary, details)
    print(text)
    elapsed = details["seconds"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "converted": converted, "summary": summary, "seconds": elapsed}, f, indent=2)
    if args.docs:
        write_tables(args.docs, {DOCS_BLOCK: text}, invoked_command(__file__, sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
