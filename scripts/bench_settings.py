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

VARIANTS = ("pipeline", "pipeline_uncompressed", "pipeline_parallel", "serial_tf", "plain_beam", "floor")
# The pipeline variants: their CLI words after `python -m pipeline --input C --output D --overwrite`.
PIPELINE_VARIANTS = {
    "pipeline": [],
    "pipeline_uncompressed": ["--compression", "none"],
    "pipeline_parallel": ["--direct_num_workers", "0"],
}
# What `--worker` runs: the script variants, and `count` (the untimed check of an output folder).
WORKERS = ("serial_tf", "plain_beam", "floor", "count")

# Prefixes the JSON line a worker prints for the driver.
RESULT_TAG = "BENCHMARK_RESULT "
