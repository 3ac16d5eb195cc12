"""Running the conversion job: the steps `convert` and `refresh` share once they have a plan."""

from __future__ import annotations

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, StandardOptions, TestOptions

from pipeline import storage
from pipeline.build import build_pipeline
from pipeline.config import Config
from pipeline.contract.manifest import Manifest, read_manifest
from pipeline.planning import Plan
from pipeline.publish import Publication
from pipeline.runners import make_pipeline, pipeline_options


def stages_only(options: PipelineOptions) -> bool:
    """True when `run()` only builds or stages the job (--dry_run, --template_location: a classic
    template, or a Flex Template launch, whose launcher does not wait for the job) on Dataflow."""
    if "Dataflow" not in str(options.view_as(StandardOptions).runner):
        return False  # local runners ignore both options and run the job
    return bool(options.view_as(GoogleCloudOptions).template_location or options.view_as(TestOptions).dry_run)


def run_job(plan: Plan, config: Config, beam_args: list[str], publication: Publication) -> Manifest | None:
    """Runs the conversion job to completion and returns the manifest it wrote; None when the job
    was only built or staged (see stages_only)."""
    options = pipeline_options(beam_args, plan.listing.bytes)
    p = make_pipeline(options)
    build_pipeline(p, plan, config, publication)
    p.run().wait_until_finish()
    return None if stages_only(options) else read_manifest(plan.output, storage.read_text)
