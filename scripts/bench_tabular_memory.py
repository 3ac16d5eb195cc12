#!/usr/bin/env python3
"""Peak memory of local tabular runs against input size, and the estimate each run logged.

Usage::

    python scripts/bench_tabular_memory.py [--sizes 10,25,50] [--gb] [--baseline DIR] [--folder bench/tabular]
                                           [--runners lean,parallel] [--docs docs/performance.md]

Writes a CSV of each size (MB; `--gb` adds 1000) into `--folder` (kept for the next run: the same
seeded rows, as the bundled sample's columns: an int id, three floats, a count, a category, a
bool, a label), converts each with `python -m pipeline --kind csv` on each local runner of
`--runners` (`lean`: the default; `parallel`: `--direct_num_workers 2`), one process per run,
and prints per run: rows, wall time, peak RSS (of its process tree, sampled as
scripts/benchmark.py samples it) and the peak the run logged as its estimate
(pipeline.runners.estimated_peak), with their ratio. `--baseline DIR` runs each CSV
through another checkout too (one made with `git archive COMMIT | tar -x -C DIR`), side by side.
A run's time grows with its input: the default sizes take minutes, `--gb` much longer. `--docs PATH`
also writes the table into that markdown page's block `tabular-memory` (`tabular-memory-parallel`
for `--runners parallel`, and so on), with this command and the machine (bench_docs).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

from bench_docs import check_blocks, invoked_command, markdown_table, write_tables
from bench_measure import TreeRssSampler

_LOG = logging.getLogger("bench_tabular_memory")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ESTIMATE = re.compile(r"estimated peak ([0-9.]+) GB")
WRITTEN = re.compile(r"written (\d+)")
HEADER = "id,x1,x2,x3,count,category,flag,label\n"
CATEGORIES = ("alpha", "beta", "gamma", "delta")
ROW = "{:>8} {:>10} {:>8} {:>8} {:>8} {:>11} {:>11} {:>8}"
HEADINGS = ("input MB", "rows", "checkout", "runner", "wall s", "peak RSS MB", "estimate MB", "est/peak")
DOCS_BLOCK = "tabular-memory"


def make_csv(path: str, megabytes: int = 0, rows: int = 0, words: bool = False) -> None:
    """A CSV of seeded rows, at least `megabytes` MB of them or else exactly `rows`; with `words`,
    a column `word` too: text of thousands of distinct values, long-tailed, as names or cities
    are (more than the dataset's statistics count exactly). Written under a temporary name first
    (an interrupted write leaves no file of the wrong size under `path`)."""
    rng = random.Random(rows or megabytes)
    header = HEADER.replace(",label", ",word,label") if words else HEADER
    target, written, row = megabytes * 1_000_000, len(header), 0
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="ascii") as f:
        f.write(header)
        while row < rows if rows else written < target:
            lines = []
            for _ in range(min(10_000, rows - row) if rows else 10_000):
                row += 1
                x1, x2, x3 = (rng.gauss(0, 1) for _ in range(3))
                count, category, flag = rng.randrange(10), rng.choice(CATEGORIES), rng.choice(("true", "false"))
                word = f"w{int(10 * rng.paretovariate(0.8))}," if words else ""
                lines.append(f"{row},{x1:.4f},{x2:.4f},{x3:.4f},{count},{category},{flag},{word}{rng.randrange(3)}\n")
            chunk = "".join(lines)
            f.write(chunk)
            written += len(chunk)
    os.replace(temporary, path)


RUNNER_FLAGS = {"lean": [], "parallel": ["--direct_num_workers", "2"]}


def measured_run(checkout: str, csv_path: str, output: str, runner: str = "lean") -> dict:
    """Converts `csv_path` with the pipeline of `checkout` in a new process: its wall time, peak
    RSS (bench_measure's sampler, as scripts/benchmark.py measures: a child's getrusage high-water
    mark would include this process, whose memory a fork copies before the exec), logged estimate
    and records written."""
    command = [sys.executable, "-m", "pipeline", "--kind", "csv", "--input", csv_path, "--output", output]
    command += RUNNER_FLAGS[runner]
    env = dict(os.environ, PYTHONPATH=checkout)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=checkout, env=env, stdout=out, stderr=err, start_new_session=True)
        sampler = TreeRssSampler(process.pid)
        sampler.start()
        code = process.wait()
        wall = time.perf_counter() - started
        sampler.stop()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} exited {code}: {stderr[-2000:]}")
    estimate = ESTIMATE.search(stderr)
    written = WRITTEN.search(stdout)
    return {
        "wall_s": wall,
        "peak_mb": sampler.peak_kb * 1024 / 1e6,
        "estimate_mb": float(estimate.group(1)) * 1000 if estimate else float("nan"),
        "rows": int(written.group(1)) if written else 0,
    }


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,25,50", help="CSV sizes in MB, comma-separated (default 10,25,50)")
    parser.add_argument("--gb", action="store_true", help="add a 1000 MB CSV (a long run)")
    parser.add_argument("--baseline", help="another checkout whose pipeline converts each CSV too, side by side")
    parser.add_argument("--folder", default=os.path.join(REPO_ROOT, "bench", "tabular"), help="where the CSVs are kept")
    parser.add_argument(
        "--runners", default="lean", help=f"local runners, comma-separated, of {sorted(RUNNER_FLAGS)} (default lean)"
    )
    parser.add_argument("--docs", help=f"also write the table into this markdown page's block {DOCS_BLOCK}")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",") if size] + ([1000] if args.gb else [])
    checkouts = [("this", REPO_ROOT)] + ([("baseline", os.path.abspath(args.baseline))] if args.baseline else [])
    block = "-".join([DOCS_BLOCK, *(r for r in args.runners.split(",") if args.runners != "lean")])
    if args.docs:
        check_blocks(args.docs, [block])
    os.makedirs(args.folder, exist_ok=True)
    print(ROW.format(*HEADINGS))
    table = []
    for size in sizes:
        folder = os.path.join(args.folder, f"{size}mb")
        csv_path = os.path.join(folder, "table.csv")
        if not os.path.exists(csv_path):
            _LOG.info("writing %s", csv_path)
            os.makedirs(folder, exist_ok=True)
            make_csv(csv_path, size)
        for (name, checkout), runner in itertools.product(checkouts, args.runners.split(",")):
            output = tempfile.mkdtemp(prefix="bench-tabular-")
            try:
                run = measured_run(checkout, csv_path, os.path.join(output, "ds"), runner)
            finally:
                shutil.rmtree(output, ignore_errors=True)
            ratio = run["estimate_mb"] / run["peak_mb"]
            row = (
                size,
                run["rows"],
                name,
                runner,
                f"{run['wall_s']:.1f}",
                f"{run['peak_mb']:.0f}",
                f"{run['estimate_mb']:.0f}",
                f"{ratio:.2f}",
            )
            print(ROW.format(*row), flush=True)
            table.append(row)
    if args.docs:
        command = invoked_command(__file__, sys.argv[1:] if argv is None else argv)
        write_tables(args.docs, {block: markdown_table(HEADINGS, table, "rrllrrrr")}, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
