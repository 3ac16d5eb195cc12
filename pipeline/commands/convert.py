"""`python -m pipeline [--input SRC] [--output DEST] [--kind K] [--config FILE] ...`: convert a
folder of class folders, a CSV of image URIs, or tabular CSV files into a dataset.

Our flags (pipeline.flags) are parsed here; every other flag (`--runner`, `--project`,
`--temp_location`, `--direct_num_workers`, ...) goes to Beam's PipelineOptions
(pipeline.runners: which runner a local run gets).

The run holds DEST's lease (pipeline.lease), prepares DEST (pipeline.output), writes into its own
staging folder and publishes through a FolderPublication (pipeline.folder_store); how it ends,
its exit codes and the last line that says what DEST holds: pipeline.ending.
"""

from __future__ import annotations

import argparse
import logging
import time

from apache_beam.options.pipeline_options import PipelineOptions

from core import storage
from core.contract.manifest import Manifest
from core.contract.versions import new_run
from core.shown import show
from pipeline.build import converting_processes
from pipeline.config import ConfigError, load_config
from pipeline.ending import dataset_outcome, saying_what_dest_holds
from pipeline.flags import (
    CONVERT_FLAGS,
    command_name,
    commands_help,
    config_overrides,
    make_parser,
    parse_command_line,
)
from pipeline.folder_store import FolderPublication, names_written
from pipeline.job import EXIT_FAILED, EXIT_REFUSED, EXIT_REJECTED, RunFailedError, run_job, stages_only
from pipeline.lease import Lease, LeaseHeldError
from pipeline.output import OutputExistsError, prepare_output
from pipeline.planning import PlanError, make_plan
from pipeline.preflight import (
    PreflightError,
    check_folder_kind,
    check_input,
    check_other_files,
    check_output,
    take_lease,
)
from pipeline.report import rejection_report, run_summary
from pipeline.runners import UnsafeOptionError, reads_local_files, refuse_unsafe_options, runner_of, runs_here
from transforms import convert_pool

_LOG = logging.getLogger("pipeline")


def parser() -> argparse.ArgumentParser:
    """Also the top-level parser (`python -m pipeline --help`): it lists the other commands."""
    description = (
        "Convert images or CSV files into sharded TFRecords (GZIP by default) of tf.train.Example,\n"
        "with a manifest.json.\n\n" + commands_help()
    )
    return make_parser(command_name(), description, CONVERT_FLAGS)


def main(argv: list[str]) -> int:
    args, beam_args = parse_command_line(parser(), CONVERT_FLAGS, argv)
    run = new_run()
    try:
        refuse_unsafe_options(beam_args)
        config = load_config(args.config, config_overrides(args))
        source, output = storage.absolute(config.input_uri), storage.absolute(config.output_uri)
        check_input(config, source)
        check_output(config.kind, source, output)
        check_folder_kind("convert", output)
        check_other_files(output, config.allow_other_files)
        lease = Lease(output, run, config.lease_seconds)
        # A job only built or staged here runs later, without this process to hold a lease.
        unattended = stages_only(PipelineOptions(beam_args))
        if not unattended:
            take_lease(lease)
    except (ConfigError, LeaseHeldError, UnsafeOptionError, PreflightError) as e:
        _LOG.error("%s", e)
        return EXIT_REFUSED
    # The converting processes start while the input is planned and Beam sets the job up:
    # ReadImages' pool takes them.
    replaced = None  # the dataset the run replaces, once prepare_output found it
    # Outermost: an interrupt while the converting processes stop or the lease is released, after
    # the summary, also says what DEST holds.
    with (
        saying_what_dest_holds(lambda: dataset_outcome(output, run, replaced and replaced.run), run),
        lease,
        convert_pool.started_ahead(converting_processes(runner_of(beam_args), config)),
    ):
        publication = FolderPublication(output, run, unattended)
        try:
            plan = make_plan(
                config, hand_over=runs_here(beam_args), local_files=reads_local_files(PipelineOptions(beam_args))
            )
            replaced = prepare_output(plan.output, run, config.overwrite, names_written(plan), unattended)
            publication.prepare()
        except (PlanError, OutputExistsError, OSError) as e:
            _LOG.error("%s", e)
            return EXIT_REFUSED
        if lease.held:
            lease.keep_renewed()
        return _convert(plan, config, beam_args, publication, replaced)


def _convert(plan, config, beam_args, publication: FolderPublication, replaced: Manifest | None) -> int:
    _LOG.info("converting %d listed file(s) from %s into %s", plan.listing.files, plan.input, plan.output)
    started = time.monotonic()
    try:
        manifest = run_job(plan, config, beam_args, publication)
    except RunFailedError as e:
        if e.rejected:  # its report stays beside a committed dataset, in the run's own folder
            show(*rejection_report(publication.folder if replaced else publication.output, e.rejected))
        outcome = dataset_outcome(publication.output, publication.run, replaced and replaced.run)
        _LOG.error("%s", outcome.line("" if e.rejected else "; ".join(e.reasons()), publication.run))
        return EXIT_REJECTED if e.rejected else EXIT_FAILED
    if manifest is None:
        show(f"Job built/staged, not run (--dry_run or --template_location); it will write {plan.output}")
        return 0
    show(*run_summary(manifest, plan.output, time.monotonic() - started))
    return 0
