"""Dataflow users see their job: the line with the job id and its console page (Beam's own
"Created job with id" lines are INFO on the apache_beam logger, which pipeline.cli keeps at
WARNING). There is no Dataflow here, so the line is built from a real DataflowPipelineResult
around a stand-in Job message, and the launch path is run through the command line with
DataflowRunner.run_pipeline replaced by one returning such a result."""

from __future__ import annotations

import pathlib
import shutil
import types

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.dataflow.dataflow_runner import DataflowPipelineResult, DataflowRunner
from apache_beam.runners.runner import PipelineResult, PipelineState

from pipeline.cli import main
from pipeline.runners import dataflow_job_url, submitted_job_line

REPO = pathlib.Path(__file__).resolve().parents[1]
JOB_ID = "2026-03-01_03_00_00-1234567890123456789"
FLAGS = ["--runner=DataflowRunner", "--project=test-project", "--region=europe-west4"]
GCS_FLAGS = ["--temp_location=gs://test-bucket/temp", "--staging_location=gs://test-bucket/staging"]
URL = f"https://console.cloud.google.com/dataflow/jobs/europe-west4/{JOB_ID}?project=test-project"


def dataflow_result(job_id: str | None, options: PipelineOptions) -> DataflowPipelineResult:
    """What DataflowRunner.run_pipeline returns: a result around the created Job message (None
    when it only staged a template)."""
    job = types.SimpleNamespace(id=job_id, currentState=None) if job_id else None
    return DataflowPipelineResult(job, runner=None, options=options)


def test_the_url_is_the_console_page_beam_names():
    assert dataflow_job_url("test-project", "europe-west4", JOB_ID) == URL


def test_the_line_names_the_job_its_page_and_how_to_cancel_it():
    options = PipelineOptions(FLAGS)
    line = submitted_job_line(dataflow_result(JOB_ID, options), options)
    assert line.startswith(f"Dataflow job {JOB_ID} submitted: {URL} ")
    assert f"gcloud dataflow jobs cancel {JOB_ID} --region europe-west4 --project test-project" in line
    assert "\n" not in line


def test_no_line_without_a_job():
    dataflow = PipelineOptions(FLAGS)
    assert submitted_job_line(dataflow_result(None, dataflow), dataflow) is None  # a staged template
    dry_run = PipelineResult(PipelineState.DONE)  # what --dry_run returns
    assert submitted_job_line(dry_run, dataflow) is None
    local = PipelineOptions([])
    assert submitted_job_line(PipelineResult(PipelineState.DONE), local) is None


def test_the_launch_path_prints_the_line_before_it_waits(tmp_path, monkeypatch, capsys):
    source = tmp_path / "in"
    for label in ("circle", "square"):
        (source / label).mkdir(parents=True)
        for image in sorted((REPO / "sample" / "images" / label).iterdir())[:2]:
            shutil.copy(image, source / label / image.name)
    printed_before_waiting = []

    def run_pipeline(self, pipeline, options):
        result = dataflow_result(JOB_ID, options)

        def wait_until_finish(duration=None):
            printed_before_waiting.append(capsys.readouterr().out)
            return PipelineState.DONE

        result.wait_until_finish = wait_until_finish
        return result

    monkeypatch.setattr(DataflowRunner, "run_pipeline", run_pipeline)
    argv = ["--input", str(source), "--output", str(tmp_path / "out"), *FLAGS, *GCS_FLAGS]
    # --dry_run: the command treats the job as staged (it writes nothing and checks no output),
    # while the replaced runner returns a created job as a real submission does.
    assert main([*argv, "--dry_run=True"]) == 0
    [out] = printed_before_waiting
    assert f"Dataflow job {JOB_ID} submitted: {URL} " in out
