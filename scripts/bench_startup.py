#!/usr/bin/env python3
"""What Beam's in-process start-up patches (pipeline/beam_patches.py) save: the same small local
conversions run with them on and with TFRECORD_BEAM_PATCHES=off, side by side.

Usage::

    python scripts/bench_startup.py [--runs 5] [--photos bench/photos2k] [--docs docs/performance.md]

Each run is a fresh `python -m pipeline` process converting on the default local runner: `images`
the class folders of sample/images, `csv` the tabular sample, `photos` the folder `--photos` names
if given (scripts/make_photo_corpus.py makes one): one patch saves on every bundle, so its share
shows on more images. Runs alternate
between on and off (which goes first alternates too), so a drift in the machine's speed falls on
both alike. Prints the medians per kind and setting, measured as scripts/benchmark.py measures
(bench_measure): wall-clock and CPU time, peak RSS of the process tree, the seconds until the job
starts (the run's `local run (...)` log line: imports and planning done) and until the first image
is read; then off / on for each. `--docs PAGE` writes the table into that page's block
`startup-patches` too, with this command and the machine (bench_docs).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

from bench_docs import check_blocks, invoked_command, markdown_table, write_tables
from bench_measure import logged_after, run_measured, tail
from bench_settings import REPO_ROOT

from pipeline.beam_patches import SWITCH

SETTINGS = ("on", "off")
SAMPLES = {"images": ["--input", os.path.join(REPO_ROOT, "sample", "images")], "csv": ["--kind", "csv"]}
# The line pipeline.runners logs as the job is about to be built: the process's imports and the
# planning are behind it.
JOB_STARTS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO pipeline: local run \(", re.MULTILINE)
FIGURES = (  # (key, column heading, format)
    ("wall_s", "wall s", "{:.2f}"),
    ("cpu_s", "CPU s", "{:.2f}"),
    ("peak_rss_mb", "peak RSS MB", "{:.0f}"),
    ("job_starts_s", "job starts s", "{:.2f}"),
    ("first_read_s", "first image s", "{:.2f}"),
)
HEADINGS = ("kind", "patches", *(heading for _, heading, _ in FIGURES))
DOCS_BLOCK = "startup-patches"
TIMEOUT_S = 900


def measure(kind: str, source: list[str], setting: str, work: str) -> dict:
    """One conversion of `source` (its flags) in a fresh process with the patches `setting`."""
    run_dir = tempfile.mkdtemp(prefix=f"{kind}-{setting}-", dir=work)
    command = ["env", f"{SWITCH}={setting}", sys.executable, "-m", "pipeline", *source]
    started = time.time()  # as run_measured's own, a file opening earlier
    output = os.path.join(run_dir, "out")
    measured = run_measured([*command, "--output", output], run_dir, TIMEOUT_S)
    if measured["rc"] != 0:
        raise SystemExit(f"{kind}, patches {setting}: exit {measured['rc']}\n{tail(measured['stderr_path'])}")
    measured["job_starts_s"] = logged_after(measured["stderr_path"], started, JOB_STARTS)
    shutil.rmtree(output)  # a photo corpus's records would fill the disk over the runs
    return measured


def _median(runs: list[dict], key: str) -> float | None:
    values = [run[key] for run in runs if run[key] is not None]
    return statistics.median(values) if values else None


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def table_rows(results: dict[tuple[str, str], list[dict]], kinds: list[str]) -> list[list[str]]:
    """Per kind: the medians with the patches on, off, and off / on (the patches' gain)."""
    rows = []
    for kind in kinds:
        medians = {s: {key: _median(results[kind, s], key) for key, _, _ in FIGURES} for s in SETTINGS}
        for setting in SETTINGS:
            rows.append([kind, setting, *(_cell(medians[setting][key], spec) for key, _, spec in FIGURES)])
        on, off = medians["on"], medians["off"]
        ratios = (off[key] / on[key] if on[key] and off[key] is not None else None for key, _, _ in FIGURES)
        rows.append([kind, "off / on", *(_cell(ratio, "{:.2f}x") for ratio in ratios)])
    return rows


def print_table(rows: list[list[str]], runs: int) -> None:
    print(f"medians of {runs} runs each, every run a fresh process; off / on: the patches' gain")
    for row in [HEADINGS, *rows]:
        print(f"{row[0]:<8}{row[1]:<10}" + "".join(f"{cell:>15}" for cell in row[2:]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per kind and setting (default 5)")
    parser.add_argument("--photos", metavar="DIR", help="a folder of class folders to convert too, e.g. bench/photos2k")
    parser.add_argument(
        "--docs", metavar="PAGE", help=f"also write the table into this markdown page's block {DOCS_BLOCK}"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.docs:
        check_blocks(args.docs, [DOCS_BLOCK])
    sources = dict(SAMPLES) | ({"photos": ["--input", os.path.abspath(args.photos)]} if args.photos else {})
    results: dict[tuple[str, str], list[dict]] = {(kind, s): [] for kind in sources for s in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="bench_startup-") as work:
        for run in range(args.runs):
            for kind, source in sources.items():
                for setting in SETTINGS if run % 2 == 0 else reversed(SETTINGS):
                    results[kind, setting].append(measure(kind, source, setting, work))
            print(f"run {run + 1} of {args.runs} done", file=sys.stderr, flush=True)
    rows = table_rows(results, list(sources))
    print_table(rows, args.runs)
    if args.docs:
        command = invoked_command(__file__, sys.argv[1:] if argv is None else argv)
        write_tables(args.docs, {DOCS_BLOCK: markdown_table(HEADINGS, rows, "ll" + "r" * len(FIGURES))}, command)


if __name__ == "__main__":
    main()
