"""Names and paths shared by the benchmark's driver, its timed workers and its report.

Standard library only: every timed worker subprocess imports this module, and its wall-clock time
includes the imports.
"""

from __future__ import annotations

import os

SCRIPTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPTS_DIR)
# Re-run as `benchmark.py --worker VARIANT` in the timed subprocesses of the script variants.
BENCHMARK_SCRIPT = os.path.join(SCRIPTS_DIR, "benchmark.py")
DEFAULT_CORPUS = os.path.join(REPO_ROOT, "bench", "photos")

VARIANTS = (
    "pipeline",
    "pipeline_threads",
    "pipeline_processes",
    "pipeline_uncompressed",
    "pipeline_parallel",
    "pipeline_1core",
    "pipeline_write_to_tfrecord",
    "pipeline_write_to_tfrecord_1core",
    "serial_tf",
    "plain_beam",
    "floor",
    "floor_1core",
    "runner_1core",
)
NAME_WIDTH = max(map(len, VARIANTS))  # of the variant column in printed lines
# The pipeline variants: their CLI words after `python -m pipeline --input C --output D --overwrite`.
PIPELINE_VARIANTS = {
    "pipeline": [],
    "pipeline_threads": [],
    "pipeline_processes": [],
    "pipeline_uncompressed": ["--compression", "none"],
    "pipeline_parallel": ["--direct_num_workers", "0"],
    "pipeline_1core": [],
    "pipeline_write_to_tfrecord": [],
    "pipeline_write_to_tfrecord_1core": [],
}
# YAML each run of a pipeline variant gets as its --config (written into the run's folder, with
# {cores} replaced by the cores the benchmark may use).
_WRITE_TO_TFRECORD = "image: {{local_write_while_reading: false}}\n"
PIPELINE_CONFIGS = {
    "pipeline_threads": "image: {{local_processes: 0}}\n",
    "pipeline_processes": "image: {{local_processes: {cores}}}\n",
    "pipeline_write_to_tfrecord": _WRITE_TO_TFRECORD,
    "pipeline_write_to_tfrecord_1core": _WRITE_TO_TFRECORD,
}
# The floors (bench_variants.worker_floor): the work every image needs, on every core they may use.
# They write no output, so there is nothing to verify.
FLOOR_VARIANTS = ("floor", "floor_1core")
# Variants run under `taskset -c CPUS`, so that a pipeline and its floor are compared on the same cores.
PINNED_CPUS = {
    "pipeline_1core": (0,),
    "pipeline_write_to_tfrecord_1core": (0,),
    "floor_1core": (0,),
    "runner_1core": (0,),
}
# What `--worker` runs: the script variants, and `count` (the untimed check of an output folder).
WORKERS = ("serial_tf", "plain_beam", *FLOOR_VARIANTS, "runner_1core", "count")

# Prefixes the JSON line a worker prints for the driver.
RESULT_TAG = "BENCHMARK_RESULT "
