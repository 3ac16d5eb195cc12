#!/usr/bin/env python3
"""What storing photos at training size (config ``image.resize``) costs a conversion and saves on
disk: the same corpora converted with and without it, side by side in one invocation.

Usage::

    python scripts/bench_resize.py [--corpus bench/photos,bench/photos10k] [--shorter_side 256]
                                   [--runs 3] [--keep bench/resize] [--json out.json]
                                   [--docs docs/performance.md]

Each folder of photos of ``--corpus`` is converted by ``python -m pipeline`` of this checkout as it
is ("full size") and with a config that stores every photo larger than ``--shorter_side`` pixels
on its shorter side scaled down to it ("resized": ``image: {resize: {shorter_side: N}}``, written
to a file the runs are given with ``--config``), each run in its own process, the two taking turns
so that both see the same load (bench_statistics.alternate: the corpus read once first, the
modules compiled). Per corpus and way it prints the medians over ``--runs`` of images per second
(the corpus' photos over the run's wall time, start-up included, as a user of the CLI sees it),
CPU seconds of the process tree, peak RSS, and the output's shards and bytes on disk (every file
of it); then the resized run's images per second over the full-size run's, against the goal
(at least 0.8x), and the bytes on disk of the full-size output over the resized one's. Each run's
output must hold a record for every photo. ``--keep DIR`` keeps each way's last output of each
corpus as ``DIR/CORPUS-full`` and ``DIR/CORPUS-resized``: the inputs of
``scripts/benchmark_input.py --data DIR/CORPUS-resized --seeds_data DIR/CORPUS-full``.
A second table says where the resized conversion's added CPU goes, per photo, timed in this process
on up to 400 photos of each corpus (bench_resize_stages): the check's 1/8-scale decode, the decode
at the scale the averaging needs, the averaging and the encode, and the speed the decode's
difference and the encode leave with a scaler that cost nothing (the most any filter reaches).
``--docs PATH`` writes both tables into that page's block ``resize-conversion``, with this command
and the machine (bench_docs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import yaml
from bench_report import load_line
from bench_resize_stages import STAGES, corpus_stages, reachable
from bench_settings import REPO_ROOT
from bench_statistics import FIGURES, alternate, begin, both_ways, checked_table, medians, photo_inputs, publish

DOCS_BLOCK = "resize-conversion"
STAGES_NOTE = (
    "Per photo of each corpus (means over up to 400 of its photos, medians of 3 passes, CPU ms in one "
    "process: scripts/bench_resize_stages.py): the full-size conversion checks a JPEG with a decode at 1/8 "
    "scale; the resized one decodes it at the DCT scale its scaling needs, scales it and encodes it. "
    "The decode's difference from the check's and the encode stay with any scaler: *reachable* is the "
    "full-size conversion's CPU per photo over itself plus them (both conversions are bound by the CPU)."
)
NAMES = {"resized": "resized", "full": "full size"}  # each way, as the table's headings call it
GOAL = 0.8  # the resized conversion's images per second over the full-size one's, at least


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        default=",".join(os.path.join(REPO_ROOT, "bench", name) for name in ("photos", "photos10k")),
        help="folders of photos, comma-separated",
    )
    parser.add_argument("--shorter_side", type=int, default=256, help="image.resize.shorter_side (default: 256)")
    parser.add_argument("--runs", type=int, default=3, help="runs per corpus and way (default: 3)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per run (default: 900)")
    parser.add_argument("--keep", help="keep each way's last output of each corpus in this folder")
    parser.add_argument("--json", help="also write every run's figures as JSON to this path")
    parser.add_argument("--docs", help=f"also write the table into this markdown page's block {DOCS_BLOCK}")
    args = parser.parse_args(argv)
    args.corpus = [corpus for corpus in args.corpus.split(",") if corpus]
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.shorter_side < 1:
        parser.error("--shorter_side must be at least 1")
    return args


def resize_config(shorter_side: int) -> str:
    """The YAML of a conversion that stores photos at `shorter_side` pixels on their shorter side."""
    return yaml.safe_dump({"kind": "images", "image": {"resize": {"shorter_side": shorter_side}}})


def _row(source: dict, runs: dict[str, list[dict]], shorter_side: int) -> dict:
    row = {"input": source["input"], "records": source["records"], "runs": runs}
    row.update(medians(runs, (*FIGURES, "shards", "bytes")))
    row["stages"] = corpus_stages(source["paths"], shorter_side)
    row["full_cpu_ms"] = 1000 * row["full_cpu_s"] / source["records"]
    row["reachable"] = reachable(row["full_cpu_ms"], row["stages"]["unavoidable"])
    for name in NAMES:
        row[f"{name}_images_per_s"] = source["records"] / row[f"{name}_wall_s"]
    row["speed_ratio"] = row["resized_images_per_s"] / row["full_images_per_s"]
    row["bytes_ratio"] = row["full_bytes"] / row["resized_bytes"] if row["resized_bytes"] else 0.0
    return row


def measure(args, sources: list[dict], config: str) -> list[dict]:
    ways = {"resized": (REPO_ROOT, ["--config", config]), "full": (REPO_ROOT, [])}
    done = alternate(sources, ways, args.runs, args.timeout, args.keep)
    return [_row(source, runs, args.shorter_side) for source, runs in zip(sources, done, strict=True)]


def _on_disk(name: str):
    return (
        f"on disk MB, {NAMES[name]} (shards)",
        lambda row: f"{row[f'{name}_bytes'] / 1e6:,.1f} ({row[f'{name}_shards']:.0f})",
    )


def table(rows: list[dict]) -> str:
    return checked_table(
        rows,
        [
            *both_ways("img/s", "images_per_s", ".0f", NAMES),
            ("resized / full size", lambda row: f"{row['speed_ratio']:.2f}x"),
            *both_ways("CPU s", "cpu_s", ".1f", NAMES),
            *both_ways("peak RSS MB", "peak_rss_mb", ".0f", NAMES),
            *(_on_disk(name) for name in NAMES),
            ("full size / resized, bytes", lambda row: f"{row['bytes_ratio']:.1f}x"),
        ],
    )


def stages_table(rows: list[dict]) -> str:
    """Where the resized conversion's added CPU goes, per photo, and the speed it leaves."""
    return checked_table(
        rows,
        [
            *((f"{stage}, ms", lambda row, stage=stage: f"{row['stages'][stage]:.2f}") for stage in STAGES),
            ("decode difference + encode, ms", lambda row: f"{row['stages']['unavoidable']:.2f}"),
            ("full-size conversion, CPU ms", lambda row: f"{row['full_cpu_ms']:.2f}"),
            ("reachable with a free scaler", lambda row: f"{row['reachable']:.2f}x"),
            ("measured", lambda row: f"{row['speed_ratio']:.2f}x"),
        ],
    )


def notes(rows: list[dict], runs: int, shorter_side: int) -> str:
    """What the figures are, and the verdict on the goal."""
    under = [row["input"] for row in rows if row["speed_ratio"] < GOAL]
    verdict = (
        f"Under the goal of {GOAL}x the full-size speed: {', '.join(under)}."
        if under
        else f"At least {GOAL}x the full-size speed on every corpus."
    )
    return (
        f"Medians of {runs} runs per corpus and way; resized: `image.resize: {{shorter_side: {shorter_side}}}`, "
        f"full size: no resize. Images per second over each run's wall time, start-up included. {verdict} "
        + load_line([run["loadavg_after"] for row in rows for done in row["runs"].values() for run in done])
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = begin(args, DOCS_BLOCK, f"resize benchmark, shorter_side {args.shorter_side}")
    sources = photo_inputs(args.corpus)
    with tempfile.TemporaryDirectory(prefix="bench-resize-") as folder:
        config = os.path.join(folder, "resize.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(resize_config(args.shorter_side))
        rows = measure(args, sources, config)
    text = f"{table(rows)}\n\n{notes(rows, args.runs, args.shorter_side)}\n\n{stages_table(rows)}\n\n{STAGES_NOTE}"
    return publish(args, rows, text, machine, (__file__, DOCS_BLOCK, argv))


if __name__ == "__main__":
    sys.exit(main())
