"""Running the conversion job: the steps `convert` and `refresh` share once they have a plan."""

from __future__ import annotations

import logging

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, StandardOptions, TestOptions

from core.contract.manifest import Manifest
from core.shown import show
from pipeline.build import build_pipeline
from pipeline.config import Config
from pipeline.folder_store import committed_manifest
from pipeline.lease import Unfinished
from pipeline.planning import Plan
from pipeline.publish import Publication
from pipeline.report import first_line
from pipeline.runners import (
    interrupts_stop_the_run,
    lean_held_bytes,
    make_pipeline,
    parallel_held_bytes,
    pipeline_options,
    runner_api_round_trip,
    stop_local_run,
    submitted_job_line,
)
from transforms import listing_handover, stopping

_LOG = logging.getLogger(__name__)

# Exit codes of the commands that run a job: 0 committed (or nothing to do); 1 finished but
# rejected (manifest.rejected.json says why); 2 refused before any work; 3 failed while running
# (the job crashed; what it wrote is removed, nothing is published, unless it failed only after
# its commit point: its last line says what the output holds); 4 a refresh committed a version
# but held it (pipeline.hold_checks): LATEST did not move. Interrupts: pipeline.ending.
EXIT_REJECTED, EXIT_REFUSED, EXIT_FAILED, EXIT_HELD = 1, 2, 3, 4


class RunFailedError(RuntimeError):
    """The job failed or its run was rejected; `rejected`: the rejected manifest, when the job got
    as far as checking its output."""

    def __init__(self, message: str, rejected: Manifest | None):
        super().__init__(message)
        self.rejected = rejected

    def reasons(self) -> list[str]:
        return list(self.rejected.rejected) if self.rejected else [f"the job failed: {self}"]


def stages_only(options: PipelineOptions) -> bool:
    """True when `run()` only builds or stages the job (--dry_run, --template_location: a classic
    template, or a Flex Template launch, whose launcher does not wait for the job) on Dataflow."""
    if "Dataflow" not in str(options.view_as(StandardOptions).runner):
        return False  # local runners ignore both options and run the job
    return bool(options.view_as(GoogleCloudOptions).template_location or options.view_as(TestOptions).dry_run)


def run_job(plan: Plan, config: Config, beam_args: list[str], publication: Publication) -> Manifest | None:
    """Runs the conversion job to completion and returns the manifest it committed; None when the
    job was only built or staged (see stages_only). When the job fails, or its run is rejected,
    removes what it wrote (but a rejected run's report) and raises RunFailedError."""
    bytes_in = plan.listing.bytes
    held = lean_held_bytes(plan.kind, plan.shards, config.image.local_write_while_reading, plan.output, bytes_in)
    options = pipeline_options(beam_args, parallel_held_bytes(plan.kind, bytes_in), lean_held_bytes=held)
    try:
        return _run(plan, config, options, publication)
    finally:
        listing_handover.forget()


def _run(plan: Plan, config: Config, options: PipelineOptions, publication: Publication) -> Manifest | None:
    stopping.reset()
    result = None
    try:
        p = make_pipeline(options)
        build_pipeline(p, plan, config, publication)
        with interrupts_stop_the_run():
            result = p.run(test_runner_api=runner_api_round_trip(options))
            submitted = submitted_job_line(result, options)
            if submitted:  # on Dataflow: the job's id and console page, before the wait
                show(submitted)
            result.wait_until_finish()
        return None if stages_only(options) else _committed(plan.output, publication)
    except RunFailedError:  # _committed cleaned up
        raise
    except BaseException as e:  # stop the run's threads, clean up, then re-raise (an interrupt as it is)
        try:
            rejected = _stop_and_clean_up(result, options, publication)
        except KeyboardInterrupt as again:  # what the run wrote stays, for the next run to remove
            raise Unfinished(
                "interrupted while cleaning up: the next run into this output removes what this one left"
            ) from again
        if isinstance(e, Exception):
            raise RunFailedError(first_line(str(e).strip() or repr(e)), rejected) from e
        raise  # an interrupt as it is: the command says what it left in the output (pipeline.ending)


def _stop_and_clean_up(result, options: PipelineOptions, publication: Publication) -> Manifest | None:
    """After a failed or interrupted run: stops its threads, then removes what it wrote (but a
    rejected run's report, which it returns)."""
    stopped = False
    try:
        stopped = stop_local_run(result, options)  # before the clean-up: they would write after it
    except Exception:
        _LOG.exception("could not stop the failed run's threads")
    try:
        rejected = publication.clean_up_failed()
    except Exception:  # report the run's failure, not the clean-up's
        _LOG.exception("could not clean up after the failed run in %s", publication.folder)
        rejected = None
    if stopped:  # nothing of this run is left to stop: DoFns of this process may run again (tests)
        stopping.reset()
    return rejected


def _committed(output: str, publication: Publication) -> Manifest:
    """The manifest this run committed in `output`; raises RunFailedError when the run was
    rejected or (a runner that lost the last step) ended without either outcome."""
    committed = _this_runs_manifest(output, publication)
    if committed is not None:
        return committed
    rejected = publication.rejected()
    if rejected is not None:
        raise RunFailedError("the run was rejected", rejected)
    publication.clean_up_failed()
    raise RunFailedError(f"the job finished but neither committed nor rejected run {publication.run}", None)


def _this_runs_manifest(output: str, publication: Publication) -> Manifest | None:
    """The manifest committed in `output`, if this run committed it."""
    committed = committed_manifest(output)
    return committed if committed is not None and committed.run == publication.run else None
