"""`python -m pipeline [--input SRC] [--output DEST] [--kind K] [--config FILE] ...`: convert a
folder of class folders, a CSV of image URIs, or tabular CSV files into a dataset.

Our flags (pipeline.flags) are parsed here; every other flag (`--runner`, `--project`,
`--temp_location`, `--direct_num_workers`, ...) goes to Beam's PipelineOptions
(pipeline.runners: which runner a local run gets).
"""

from __future__ import annotations

import argparse
import logging
import time

from pipeline.config import ConfigError, load_config
from pipeline.flags import CONVERT_FLAGS, config_overrides, make_parser
from pipeline.job import run_job
from pipeline.output import OutputExistsError, prepare_output
from pipeline.planning import PlanError, make_plan
from pipeline.publish import FolderPublication, problems
from pipeline.report import run_summary

_LOG = logging.getLogger("pipeline")


def parser() -> argparse.ArgumentParser:
    return make_parser(
        "python -m pipeline",
        "Convert images or CSV files into sharded GZIP TFRecords of tf.train.Example, with a manifest.json.",
        CONVERT_FLAGS,
    )


def main(argv: list[str]) -> int:
    args, beam_args = parser().parse_known_args(argv)
    try:
        config = load_config(args.config, config_overrides(args))
        plan = make_plan(config)
        prepare_output(plan.output, config.overwrite)
    except (ConfigError, PlanError, OutputExistsError) as e:
        _LOG.error("%s", e)
        return 2
    _LOG.info("converting %d listed file(s) from %s into %s", plan.listing.files, plan.input, plan.output)
    started = time.monotonic()
    manifest = run_job(plan, config, beam_args, FolderPublication(plan.output))
    if manifest is None:
        print(f"Job built/staged, not run (--dry_run or --template_location); it will write {plan.output}")
        return 0
    print(run_summary(manifest, plan.output, time.monotonic() - started))
    found = problems(plan, manifest)
    for problem in found:
        _LOG.error("%s", problem)
    return 1 if found else 0
