#!/usr/bin/env python3
"""What the dataset's statistics cost a conversion: this checkout against a baseline checkout that
computes none, side by side in one invocation.

Usage::

    python scripts/bench_statistics.py --baseline DIR [--corpus bench/photos2500,bench/photos10k]
                                       [--rows 100000,300000] [--runs 3] [--json out.json]
                                       [--docs docs/performance.md]

DIR is a checkout of the code to compare with (``git worktree add --detach DIR COMMIT``). Each
input is converted by ``python -m pipeline`` of both checkouts, each run in its own process with
its checkout first on the path, the two taking turns (this, baseline, this, ...) so that both see
the same load: each folder of photos of ``--corpus`` (``scripts/make_photo_corpus.py --out
bench/photos10k --count 10000``; with ``--count 2500`` the same corpus' first 2,500) and, for each
of ``--rows``, a seeded CSV of that many rows kept in ``--folder`` (ints, floats, a category, a
flag, a long-tailed text column of thousands of distinct values, a label: the columns of
scripts/bench_tabular_memory.py and its `word`). The corpus and the CSVs are read once first, and
both checkouts' modules compiled, so that no run pays for a cold cache.

Per input and checkout it prints the medians over ``--runs``: CPU seconds (user + system of the
process tree: the figure other load on the machine barely moves), wall seconds and peak RSS (the
process tree's, sampled as scripts/benchmark.py samples it); then this checkout's CPU over the
baseline's and the difference of their peak RSS. Each run's output is checked: the records its
manifest counts are the input's, and this checkout's manifest names its statistics file. With
several corpora or ``--rows``, the growth of each checkout's peak RSS from the fewest records to
the most shows whether the statistics' memory is bounded. ``--docs PATH`` writes the table into that page's
block ``statistics-cost``, with this command and the machine (bench_docs).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence

from bench_corpus import corpus_extensions
from bench_docs import check_blocks, figures_table, invoked_command, this_machine, write_tables
from bench_measure import run_measured, tail
from bench_settings import REPO_ROOT
from bench_tabular_memory import make_csv

DOCS_BLOCK = "statistics-cost"
BUDGET = 1.10  # the statistics may add at most 10% to a conversion's CPU
PACKAGES = ("core", "pipeline", "transforms")  # a checkout's code a conversion runs
FIGURES = ("cpu_s", "wall_s", "peak_rss_mb")  # what the medians are taken of


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="a checkout of the code to compare with")
    parser.add_argument(
        "--corpus", default=os.path.join(REPO_ROOT, "bench", "photos10k"), help="folders of photos, comma-separated"
    )
    parser.add_argument("--rows", default="100000,300000", help="CSV sizes in rows, comma-separated")
    parser.add_argument("--folder", default=os.path.join(REPO_ROOT, "bench", "statistics"), help="where CSVs are kept")
    parser.add_argument("--runs", type=int, default=3, help="runs per input and checkout (default: 3)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per run (default: 900)")
    parser.add_argument("--json", help="also write every run's figures as JSON to this path")
    parser.add_argument("--docs", help=f"also write the table into this markdown page's block {DOCS_BLOCK}")
    args = parser.parse_args(argv)
    args.corpus = [corpus for corpus in args.corpus.split(",") if corpus]
    args.rows = [int(rows) for rows in args.rows.split(",") if rows]
    if not os.path.isdir(os.path.join(args.baseline, "pipeline")):
        parser.error(f"--baseline {args.baseline}: not a checkout (no pipeline/ in it)")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def photo_inputs(folders: list[str]) -> list[dict]:
    """Each folder of photos as an input (what it is called, its kind, the CLI words that convert
    it, the records it must become), its files read once and Beam imported once first."""
    from bench_driver import prepare_corpus, warm_up

    found, every_item = [], []
    for folder in folders:
        items, corpus = prepare_corpus(folder, corpus_extensions())
        every_item += items
        found.append(
            {
                "input": f"{len(items):,} photos",
                "kind": "photos",
                "words": ["--input", corpus["path"]],
                "records": len(items),
                "paths": [path for path, _ in items],
            }
        )
    warm_up(every_item)
    return found


def inputs(args) -> list[dict]:
    """Each photo corpus and a CSV of each size of `--rows` (written when missing): what each is
    called, its kind, the CLI words that convert it and the records it must become."""
    found = photo_inputs(args.corpus)
    os.makedirs(args.folder, exist_ok=True)
    for rows in args.rows:
        path = os.path.join(args.folder, f"table-{rows}.csv")
        if not os.path.exists(path):
            print(f"writing {path}", file=sys.stderr, flush=True)
            make_csv(path, rows=rows, words=True)
        pathlib.Path(path).read_bytes()  # into the page cache
        found.append(
            {"input": f"{rows:,} rows", "kind": "rows", "words": ["--kind", "csv", "--input", path], "records": rows}
        )
    return found


def run_one(
    source: dict, checkout: str, folder: str, timeout: float, words: Sequence[str] = (), keep: str | None = None
) -> dict:
    """One conversion of `source` by `checkout`'s pipeline (with the CLI words `words` after its
    own), measured, and its output checked; `keep`: where its output is moved to, not deleted."""
    run_dir = tempfile.mkdtemp(dir=folder)
    dest = os.path.join(run_dir, "out")
    command = [sys.executable, "-m", "pipeline", *source["words"], "--output", dest, "--overwrite", *words]
    measured = run_measured(command, run_dir, timeout, checkout=checkout)
    run = {key: measured[key] for key in FIGURES}
    if measured["rc"] != 0:
        why = "timed out" if measured["timed_out"] else f"exit {measured['rc']}"
        run["failed"] = f"{why}: {tail(measured['stderr_path'], 1500)}"
    else:
        run.update(_output(dest))
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
            os.makedirs(os.path.dirname(os.path.abspath(keep)), exist_ok=True)
            shutil.move(dest, keep)
    shutil.rmtree(run_dir, ignore_errors=True)
    return run


def _output(dest: str) -> dict:
    """The records the output's manifest counts, the statistics file it names ("" for none), its
    shards and the bytes of every file in it."""
    from core.contract.manifest import read_manifest

    manifest = read_manifest(dest, lambda path: pathlib.Path(path).read_text() if os.path.exists(path) else None)
    on_disk = sum(path.stat().st_size for path in pathlib.Path(dest).rglob("*") if path.is_file())
    shards = sum(len(split.shards) for split in manifest.splits.values())
    return {
        "records": manifest.records,
        "statistics_file": manifest.statistics_file,
        "shards": shards,
        "bytes": on_disk,
    }


def check(run: dict, source: dict, name: str) -> str:
    """Why a run's output is not what it must be ("ok" when it is)."""
    if "failed" in run:
        return f"FAILED: {run['failed']}"
    if run["records"] != source["records"]:
        return f"WRONG: {run['records']:,} records for {source['records']:,}"
    if name == "this" and not run["statistics_file"]:
        return "WRONG: no statistics file"
    return "ok"


def alternate(
    sources: list[dict],
    ways: dict[str, tuple[str, list[str]]],
    runs: int,
    timeout: float,
    keep: str | None = None,
) -> list[dict[str, list[dict]]]:
    """Every input converted `runs` times each way ({name: (checkout, extra CLI words)}), the ways
    taking turns; per input, each way's runs, each checked (`check`). With `keep`, each way's
    last output of each input is kept in `keep`/INPUT-WAY (INPUT: the input folder's name)."""
    for checkout in {checkout for checkout, _ in ways.values()}:  # no run compiles the modules it imports
        for package in PACKAGES:
            compileall.compile_dir(os.path.join(checkout, package), quiet=1)
    done = []
    with tempfile.TemporaryDirectory(prefix="bench-side-by-side-") as folder:
        for source in sources:
            by_way: dict[str, list[dict]] = {name: [] for name in ways}
            for index in range(runs):
                for name, (checkout, words) in ways.items():
                    kept = None
                    if keep and index == runs - 1:
                        kept = os.path.join(keep, f"{os.path.basename(source['words'][-1])}-{name}")
                    run = run_one(source, checkout, folder, timeout, words, kept)
                    run["check"] = check(run, source, name)
                    run["loadavg_after"] = os.getloadavg()[0]
                    by_way[name].append(run)
                    print(
                        f"  {source['input']}, {name}, run {index + 1}/{runs}: {run['cpu_s']:.1f} s CPU, "
                        f"{run['wall_s']:.1f} s wall, peak RSS {run['peak_rss_mb']:.0f} MB, {run['check']}",
                        file=sys.stderr,
                        flush=True,
                    )
            done.append(by_way)
    return done


def medians(runs: dict[str, list[dict]], figures: Sequence[str] = FIGURES) -> dict:
    """{WAY_FIGURE: the median of that way's runs} for each way and figure, and `check`: the
    first problem of any run ("ok" for none)."""
    row = {}
    for name, done in runs.items():
        for figure in figures:
            row[f"{name}_{figure}"] = statistics.median(run.get(figure, 0) for run in done)
    problems = [run["check"] for done in runs.values() for run in done if run["check"] != "ok"]
    row["check"] = problems[0] if problems else "ok"
    return row


def measure(args, sources: list[dict]) -> list[dict]:
    """Every input, its runs round-robin between the two checkouts; a row of medians per input."""
    ways = {"this": (REPO_ROOT, []), "baseline": (os.path.abspath(args.baseline), [])}
    return [
        _row(source, runs)
        for source, runs in zip(sources, alternate(sources, ways, args.runs, args.timeout), strict=True)
    ]


def _row(source: dict, runs: dict[str, list[dict]]) -> dict:
    row = {"input": source["input"], "kind": source["kind"], "records": source["records"], "runs": runs}
    row.update(medians(runs))
    row["cpu_ratio"] = row["this_cpu_s"] / row["baseline_cpu_s"]
    row["rss_difference_mb"] = row["this_peak_rss_mb"] - row["baseline_peak_rss_mb"]
    return row


def both_ways(heading: str, figure: str, spec: str, ways: dict[str, str]) -> list[tuple]:
    """A column of `figure` for each way ({name: what the heading calls it}), formatted by `spec`."""
    return [
        (f"{heading}, {label}", lambda row, name=name: format(row[f"{name}_{figure}"], spec))
        for name, label in ways.items()
    ]


def checked_table(rows: list[dict], columns: list[tuple]) -> str:
    """The rows' table: the input, `columns`, and the first problem of its runs ("ok" for none)."""
    every = [("input", lambda row: row["input"]), *columns, ("check", lambda row: row["check"].split("\n")[0])]
    return figures_table(rows, every, "l" + "r" * len(columns) + "l")


CHECKOUTS = {"this": "this", "baseline": "baseline"}


def table(rows: list[dict]) -> str:
    return checked_table(
        rows,
        [
            *both_ways("CPU s", "cpu_s", ".1f", CHECKOUTS),
            ("CPU this / baseline", lambda row: f"{row['cpu_ratio']:.3f}"),
            *both_ways("wall s", "wall_s", ".1f", CHECKOUTS),
            *both_ways("peak RSS MB", "peak_rss_mb", ".0f", CHECKOUTS),
            ("RSS difference MB", lambda row: f"{row['rss_difference_mb']:+.0f}"),
        ],
    )


def notes(rows: list[dict], runs: int) -> str:
    """The verdict on the CPU budget, and how each checkout's peak RSS grows with the rows."""
    over = [row["input"] for row in rows if row["cpu_ratio"] > BUDGET]
    lines = [
        f"Medians of {runs} runs per input and checkout. "
        + (f"Over the {BUDGET - 1:.0%} CPU budget: {', '.join(over)}." if over else f"All within {BUDGET - 1:.0%} CPU.")
    ]
    for kind in ("photos", "rows"):
        sizes = sorted((row for row in rows if row["kind"] == kind), key=lambda row: row["records"])
        if len(sizes) > 1:
            fewest, most = sizes[0], sizes[-1]
            growth = ", ".join(
                f"{name} {most[f'{name}_peak_rss_mb'] - fewest[f'{name}_peak_rss_mb']:+.0f} MB"
                for name in ("this", "baseline")
            )
            lines.append(f"Peak RSS from {fewest['input']} to {most['input']}: {growth}.")
    return " ".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = begin(args, DOCS_BLOCK, f"statistics benchmark; baseline {os.path.abspath(args.baseline)}")
    rows = measure(args, inputs(args))
    return publish(args, rows, f"{table(rows)}\n\n{notes(rows, args.runs)}", machine, (__file__, DOCS_BLOCK, argv))


def begin(args, block: str, what: str) -> str:
    """The machine line, once the project is on the path and, with `--docs`, the page is found to
    have the block (before any run); says what runs on which machine."""
    if REPO_ROOT not in sys.path:
        sys.path.insert(1, REPO_ROOT)  # the project's packages, after this folder's bench_* modules
    if args.docs:
        check_blocks(args.docs, [block])
    machine = this_machine()
    print(f"{what}: {machine}", file=sys.stderr)
    return machine


def publish(args, rows: list[dict], text: str, machine: str, script: tuple[str, str, list[str] | None]) -> int:
    """Prints `text`; with `--docs` writes it into the page's block, with `--json` every row; 0 if
    every row's check is ok. `script`: the script's file, its block and the words it was given
    (None: its command line's)."""
    path, block, argv = script
    print(text)
    if args.docs:
        write_tables(args.docs, {block: text}, invoked_command(path, sys.argv[1:] if argv is None else argv))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "args": vars(args), "inputs": rows}, f, indent=1)
    return 0 if all(row["check"] == "ok" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
