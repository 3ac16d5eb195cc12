#!/usr/bin/env python3
"""Benchmark the conversion pipeline against reference ways of writing the same TFRecords.

Usage::

    python scripts/benchmark.py [--corpus bench/photos]
                                [--variants pipeline,pipeline_threads,pipeline_processes,pipeline_uncompressed,
                                            pipeline_parallel,pipeline_1core,pipeline_write_to_tfrecord,
                                            pipeline_write_to_tfrecord_1core,serial_tf,plain_beam,floor,
                                            floor_1core,runner_1core]
                                [--runs 3] [--pipeline_args "--some_flag value"] [--json results.json]
                                [--docs docs/performance.md]

    # what the dataset's statistics add, against a checkout (DIR) without them (bench_statistics.py)
    python scripts/bench_statistics.py --baseline DIR --corpus bench/photos2500,bench/photos10k
                                       --rows 100000,300000 --runs 3 [--docs docs/performance.md]

Runs every variant ``--runs`` times, each run in its own subprocess, round-robin (run 1 of every
variant, then run 2, ...), on a folder of ``<class>/<image>`` files (default ``bench/photos``, built
with ``scripts/make_photo_corpus.py`` when missing; the pipeline's image extensions less TIFF,
which the TensorFlow variants cannot decode), and reports per variant the MEDIAN over its runs
of:

* images/s and MB/s: the corpus' file count and input bytes divided by the wall-clock time of the
  whole subprocess, interpreter start to exit (imports and runner start-up included, as a user of
  the CLI sees it). The time after imports is also reported (``img/s work``): for the script
  variants from their own clock, for the pipeline variants the ``elapsed`` of the CLI's summary
  (job construction and run, after imports and planning).
* peak RSS: the maximum, over samples taken every ~50 ms, of the summed VmRSS of the subprocess and
  all its descendants (read from /proc; shared pages are counted once per process).
* start-up: for the pipeline variants, from launch to the timestamp of ReadImages' first log line
  (its first image read: imports, planning, building and translating the job, listing the
  sources); for the script variants, wall-clock minus their timed work.

plus ratios: throughput vs ``serial_tf``, peak RSS vs ``plain_beam``, and each pipeline variant's
images/s over those of the floor on the same cores, wall-clock and in-job (its ``elapsed`` against
the floor's time after imports).

Variants:

``pipeline``    our CLI: ``python -m pipeline --input CORPUS --output TMPDIR --overwrite`` plus the
                words of ``--pipeline_args`` (give it as ``--pipeline_args="--flag value"`` when it
                starts with a dash and has no space). A run that fails is reported with its stderr
                and the variant's remaining runs are skipped.
``pipeline_threads``  the same with ``image.local_processes: 0``: its images converted on
                ReadImages' threads in the pipeline's own process (the default below 3 cores).
``pipeline_processes``  the same with a converting process per core
                (transforms/convert_pool.py; the default from 3 cores on).
``pipeline_uncompressed``  the same with ``--compression none``: what GZIP costs in time on this
                corpus (the bytes it saves: the ``bytes`` of the JSON's verification).
``pipeline_parallel``  the same with ``--direct_num_workers 0``: the FnApiRunner with an
                in-process worker per core, instead of the CLI's default single-threaded runner
                (see pipeline/runners.py).
``pipeline_1core``  ``pipeline`` under ``taskset -c 0``: one core, to compare with ``floor_1core``.
``pipeline_write_to_tfrecord``  ``pipeline`` with ``image.local_write_while_reading: false``: the
                records held until WriteToTFRecord writes them, as before issue 13 and as on
                every runner but the default local one (transforms/shard_parts.py);
                ``pipeline_write_to_tfrecord_1core`` the same under ``taskset -c 0``.
``serial_tf``   the TensorFlow tutorials' serial loop: ``tf.io.read_file``, ``tf.io.decode_jpeg`` for
                the dimensions, a ``tf.train.Example`` (image/encoded, height, width, channels,
                label, class text, filename, format, under the pipeline's feature keys) written
                with ``tf.io.TFRecordWriter(path, options="GZIP")`` to one file.
``plain_beam``  the plain Beam pipeline on the DirectRunner (default options):
                ``Create(paths) | Reshuffle() | ParDo(read bytes, decode_jpeg for the dimensions, build
                the Example) | Reshuffle() | WriteToTFRecord(GZIP, num_shards=8)``.
``floor``       the necessary work, without Beam's runner: a multiprocessing pool of one process
                per CPU it may use (``os.sched_getaffinity``), each given contiguous chunks of
                files, does per file what the pipeline must, with the pipeline's own code
                (transforms.image_convert): read it, ``check_image``, encode the pipeline's
                Example, frame it as a TFRecord and append it as a GZIP piece
                (transforms.gzip_pieces) to a file of the chunk's own (any conversion's output
                has to reach the page cache). It imports no Beam: its start-up is what a plain
                script pays.
``floor_1core`` ``floor`` under ``taskset -c 0``, hence one process. ``taskset`` (util-linux) must
                be installed for the 1-core variants.
``runner_1core`` ``pipeline_1core`` with ReadImages' per-source work (read, check, Example) replaced
                by one ready Example for every source: what a run costs besides the per-image
                work (Beam's runner, framing, GZIP, writing and reading back the shards).

Before timing, the corpus is read once (so every variant sees a warm page cache) and TensorFlow and
Beam are imported once in a throw-away process (so the first run does not pay for a cold disk
cache). After the first run of each variant its output is checked, untimed: the TFRecord records are
counted (for ``pipeline``, those of the shards listed in ``manifest.json``) and compared with the
corpus' file count (``--no-verify`` skips this). Each run's output is deleted after it (unless
``--keep``), so every run writes into a page cache in the same state.

Prints a table, then per-image costs measured in this process on one thread (the integrity check
against header-only dimensions; GZIP as stored blocks, through ISA-L and the stdlib's zlib; the
read-back), to stdout and, with ``--json PATH``, writes every figure (each run included) there.
With ``--docs PATH``, the variants and the per-image costs go into that markdown page too, as
tables in its blocks ``conversion-FILES`` and ``conversion-FILES-costs`` (FILES: the corpus' image
count), each with this command and the machine (``bench_docs``).
This is a script, not a test: nothing in the test suite times anything.

The code, beside this file: ``bench_driver`` (the steps), ``bench_corpus`` (listing the corpus),
``bench_runs`` (the round-robin of runs), ``bench_measure`` (one measured subprocess and its
process tree's RSS), ``bench_variants`` (the script variants and the record counter, run as
``benchmark.py --worker``), ``bench_costs`` (the per-image costs), ``bench_report`` (table and
JSON, and the docs' tables), ``bench_docs`` (writing tables into a page), ``bench_settings``
(names they share).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from bench_docs import invoked_command
from bench_settings import BENCHMARK_SCRIPT, DEFAULT_CORPUS, REPO_ROOT, VARIANTS, WORKERS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="folder of <class>/<image> (default: bench/photos)")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {','.join(VARIANTS)}"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per variant (default: 3)")
    parser.add_argument(
        "--pipeline_args", default="", help='extra CLI words for the pipeline variant, e.g. --pipeline_args="--x 1"'
    )
    parser.add_argument("--json", default=None, help="also write all figures as JSON to this path")
    parser.add_argument(
        "--docs",
        default=None,
        help="also write the tables into their blocks of this markdown page, "
        "<!-- table: conversion-FILES --> and <!-- table: conversion-FILES-costs -->",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per run (default: 600)")
    parser.add_argument("--tmp", default=None, help="where run outputs are written (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the run output folders")
    parser.add_argument("--no-verify", dest="verify", action="store_false", help="do not count the output records")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip the page-cache warm-up")
    # Internal: the timed subprocesses (`--extensions`: the corpus' image file extensions, comma-separated).
    parser.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    parser.add_argument("--dest", help=argparse.SUPPRESS)
    parser.add_argument("--extensions", help=argparse.SUPPRESS)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; for the driver, `variants` and `pipeline_args` become lists of words."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.worker:
        if args.worker != "count" and not args.extensions:
            parser.error(f"--worker {args.worker} needs --extensions")
        return args
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"unknown variant(s) {unknown}; choose from {','.join(VARIANTS)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    args.variants = variants
    args.pipeline_args = shlex.split(args.pipeline_args)
    args.command = invoked_command(BENCHMARK_SCRIPT, sys.argv[1:] if argv is None else argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if REPO_ROOT not in sys.path:
        sys.path.insert(1, REPO_ROOT)  # the project's packages, after this folder's bench_* modules
    # Imported here: a timed worker loads only what its variant needs, and bench_driver loads the project.
    if args.worker:
        import bench_variants

        return bench_variants.run_worker(args)
    import bench_driver

    return bench_driver.run_benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
