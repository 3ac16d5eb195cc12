"""The benchmark's steps once its flags are parsed: prepare the corpus, warm up, run every variant,
time the per-image costs, report. Imports the project (pipeline.config pulls in Apache Beam), so only
the driver imports this module, never a timed worker."""

from __future__ import annotations

import os
import subprocess
import sys

from bench_corpus import build_corpus_if_missing, corpus_extensions, corpus_stats, list_corpus, warm_page_cache
from bench_costs import measure_per_image_costs
from bench_docs import check_blocks, write_tables
from bench_measure import child_env
from bench_report import (
    docs_table_names,
    docs_tables,
    print_bytecode_note,
    print_load_note,
    print_per_image_costs,
    print_table,
    summarize_all,
    without_bytecode,
    write_report,
)
from bench_runs import RoundRobin, RunSettings


def prepare_corpus(corpus_arg: str, extensions: tuple[str, ...]) -> tuple[list[tuple[str, str]], dict]:
    """The corpus' (path, label) items and its path and figures; builds the default corpus if missing."""
    corpus_path = os.path.abspath(corpus_arg)
    build_corpus_if_missing(corpus_path, extensions)
    items = list_corpus(corpus_path, extensions)
    return items, {"path": corpus_path, **corpus_stats(items)}


# Each on its own: a machine without TensorFlow (the pipeline and the floor need none) still warms Beam.
WARM_IMPORTS = """
import importlib
for name in ("tensorflow", "apache_beam"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
"""


def warm_up(items: list[tuple[str, str]]) -> None:
    """Reads the corpus once and imports TensorFlow and Beam once in a throw-away process, so that no
    variant's first run pays for a cold page cache or a cold disk cache."""
    warm_page_cache(items)
    subprocess.run(
        [sys.executable, "-c", WARM_IMPORTS],
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


def run_benchmark(args) -> int:
    """Runs the benchmark `args` (benchmark.parse_args) describe; 0 if every run of every variant succeeded."""
    extensions = corpus_extensions()
    items, corpus = prepare_corpus(args.corpus, extensions)
    if args.docs:
        check_blocks(args.docs, docs_table_names(corpus["files"]))
    print(
        f"corpus {corpus['path']}: {corpus['files']} files, {corpus['mb']:.1f} MB; variants {args.variants}, "
        f"{args.runs} run(s) each",
        flush=True,
    )
    if args.warmup:
        warm_up(items)
    # After the warm-up, which caches what it may; the benchmark's own modules are not the runs'.
    uncached = without_bytecode(m for m in list(sys.modules.values()) if not m.__name__.startswith("bench_"))

    load_start = os.getloadavg()
    settings = RunSettings(
        corpus=corpus,
        extensions=extensions,
        pipeline_args=args.pipeline_args,
        runs=args.runs,
        timeout=args.timeout,
        verify=args.verify,
        keep=args.keep,
        tmp=args.tmp,
    )
    round_robin = RoundRobin(args.variants, settings)
    round_robin.run_all()
    results = summarize_all(args.variants, round_robin.runs, round_robin.verified, round_robin.problems)

    print_table(results, corpus, args.runs)
    costs = measure_per_image_costs(items, args.runs)
    print_per_image_costs(costs, results, args.runs)
    load_end = os.getloadavg()
    print_load_note(load_start)
    print_bytecode_note(uncached)
    if args.json:
        write_report(args.json, settings, (load_start, load_end), results, costs, uncached)
    if args.docs:
        write_tables(args.docs, docs_tables(results, costs, corpus["files"]), args.command)
    return 0 if all(r["status"] == "ok" for r in results.values()) else 1
