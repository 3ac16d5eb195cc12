"""Dataflow submission, tested as far as it goes offline: the settings file becomes Beam flags,
an experiment that would drop records is refused on every launch path, DataflowRunner builds the
job with --dry_run, a classic template staged on the GCS emulator
describes our steps, worker image, packaging and options, the job graph does not grow with the
input, setup.py builds the worker package, and a refresh launched as a template stages a job that
moves LATEST itself and writes nothing before it runs."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import apache_beam as beam
import pytest
import yaml
from apache_beam.internal import pickler
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2

from core.contract.layout import SOURCES_NAME
from core.contract.versions import LATEST_NAME
from pipeline.build import build_pipeline
from pipeline.cli import main
from pipeline.commands import dataflow as dataflow_command
from pipeline.config import load_config
from pipeline.dataflow.flex_template import TemplateError, template_parameters
from pipeline.dataflow.launch_flags import beam_flags, gcloud_flags, launch_body, launch_environment
from pipeline.dataflow.settings import SettingsError, load_settings
from pipeline.folder_store import FolderPublication
from pipeline.planning import make_plan
from pipeline.runners import UnsafeOptionError, pipeline_options
from pipeline.version_store import VersionPublication
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample" / "images"
WORKER_IMAGE = "us-central1-docker.pkg.dev/test-project/tfrecord/tfrecord-worker:0.1.0"
ENV = {
    "PROJECT": "test-project",
    "BUCKET": "test-bucket",
    "REGION": "europe-west4",
    "SUBNETWORK": "regions/europe-west4/subnetworks/private",
    "USE_PUBLIC_IPS": "false",
}
OUR_STEPS = {
    "ListClassFolders",
    "PermuteSources",
    "SpreadReads",
    "ReadImages",
    "WriteSplits",
    "WriteDeadLetters",
    "Summarize",
    "PublishManifest",
}


def settings(**overrides: str) -> dict:
    return load_settings(
        REPO / "configs" / "cloud" / "dataflow.yaml",
        environ=ENV,
        assignments=[f"{k.replace('__', '.')}={v}" for k, v in overrides.items()],
    )


def package_copy(tmp_path: pathlib.Path) -> pathlib.Path:
    """setup.py and the packages it lists, alone in a folder (building there leaves the repo clean)."""
    root = tmp_path / "src"
    root.mkdir()
    shutil.copy(REPO / "setup.py", root)
    for package in ("core", "pipeline", "transforms"):
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def small_input(root: pathlib.Path, per_class: int = 3) -> pathlib.Path:
    for label_dir in sorted(SAMPLE.iterdir()):
        (root / label_dir.name).mkdir(parents=True)
        for path in sorted(label_dir.iterdir())[:per_class]:
            shutil.copy(path, root / label_dir.name / path.name)
    return root


def step_names(proto: beam_runner_api_pb2.Pipeline) -> set[str]:
    """The top-level transforms of a pipeline proto (our build_pipeline's labels)."""
    names = set()
    for root_id in proto.root_transform_ids:
        names |= {
            proto.components.transforms[t].unique_name for t in proto.components.transforms[root_id].subtransforms
        }
    return names


def container_images(proto: beam_runner_api_pb2.Pipeline) -> set[str]:
    return {
        beam_runner_api_pb2.DockerPayload.FromString(env.payload).container_image
        for env in proto.components.environments.values()
    }


def stage_template(
    emulator, bucket: str, argv: list[str], name: str, extra_flags=()
) -> tuple[dict, beam_runner_api_pb2.Pipeline]:
    """Runs the CLI with DataflowRunner and --template_location on the emulator; returns the
    staged template JSON and the pipeline proto it points to."""
    flags = beam_flags(
        settings(
            job__temp_location=f"gs://{bucket}/temp", job__staging_location=f"gs://{bucket}/staging", job__setup_file=""
        )["job"]
    )
    location = f"gs://{bucket}/templates/{name}.json"
    assert main([*argv, *flags, *extra_flags, f"--template_location={location}"]) == 0
    body = json.loads(emulator.read_bytes(location))
    pipeline_url = body["environment"]["sdkPipelineOptions"]["options"]["pipelineUrl"]
    return body, beam_runner_api_pb2.Pipeline.FromString(emulator.read_bytes(pipeline_url))


# -- settings -------------------------------------------------------------------------------------


def test_settings_become_beam_flags_that_beam_knows():
    flags = beam_flags(settings()["job"])
    options = PipelineOptions(flags).get_all_options()
    for flag in flags:
        name = flag[2:].split("=", 1)[0]
        assert name.removeprefix("no_") in options, f"{flag} is not a Beam option"
    assert options["runner"] == "DataflowRunner"
    assert (options["project"], options["region"]) == ("test-project", "europe-west4")
    assert options["temp_location"] == "gs://test-bucket/dataflow/temp"
    assert options["staging_location"] == "gs://test-bucket/dataflow/staging"
    assert options["service_account_email"] == "tfrecord-dataflow@test-project.iam.gserviceaccount.com"
    assert options["subnetwork"] == "regions/europe-west4/subnetworks/private" and options["use_public_ips"] is False
    assert options["max_num_workers"] == 20 and options["machine_type"] == "n2-standard-4"
    assert sorted(options["labels"]) == ["app=tfrecord-pipeline", "env=dev"]
    assert options["setup_file"] == str(REPO / "setup.py")
    assert "network" not in {f[2:].split("=")[0] for f in flags}  # empty settings are left out

    g = gcloud_flags(settings()["job"])
    assert "--disable-public-ips" in g and "--max-workers=20" in g and "--region=europe-west4" in g
    assert launch_environment(settings()["job"])["ipConfiguration"] == "WORKER_IP_PRIVATE"


def test_settings_hold_placeholders_not_projects():
    with pytest.raises(SettingsError, match="BUCKET, PROJECT"):
        load_settings(REPO / "configs" / "cloud" / "dataflow.yaml", environ={})
    with pytest.raises(SettingsError, match="unknown key"):
        settings(job__max_workerz="3")
    with pytest.raises(TemplateError, match="not parameters of the refresh template"):
        launch_body(settings(), "gs://b/t.json", "job", {"inputs": "gs://x"})
    raw = yaml.safe_load((REPO / "configs" / "cloud" / "dataflow.yaml").read_text())
    job, refresh = raw["job"], raw["refresh"]
    project_specific = [job[k] for k in ("project", "temp_location", "staging_location", "service_account_email")]
    project_specific += [
        raw["images"]["repository"],
        raw["templates"]["location"],
        refresh["scheduler_service_account"],
    ]
    assert all("${" in value for value in project_specific), project_specific


def test_each_shape_of_setting_is_spelled_for_each_launcher():
    overrides = {"use_public_ips": "true", "experiments": "[a, b]", "num_workers": "3", "disk_size_gb": "50"}
    job = settings(**{f"job__{k}": v for k, v in overrides.items()})["job"]
    beam = beam_flags(job)
    assert {"--use_public_ips", "--experiments=a", "--experiments=b", "--num_workers=3"} <= set(beam)
    assert "--disk_size_gb=50" in beam
    assert set(PipelineOptions(beam).get_all_options()["experiments"]) >= {"a", "b"}

    g = gcloud_flags(job)
    assert "--additional-experiments=a,b" in g and "--additional-user-labels=app=tfrecord-pipeline,env=dev" in g
    assert "--num-workers=3" in g
    assert not any("public-ips" in f or "disk" in f or "setup" in f for f in g), g  # public IPs are gcloud's default

    environment = launch_environment(job)
    assert environment["ipConfiguration"] == "WORKER_IP_PUBLIC"
    assert environment["additionalExperiments"] == ["a", "b"]
    assert environment["additionalUserLabels"] == {"app": "tfrecord-pipeline", "env": "dev"}
    assert (environment["numWorkers"], environment["diskSizeGb"], environment["maxWorkers"]) == (3, 50, 20)
    assert not {"project", "region", "setup_file", "setupFile"} & set(environment), environment


def test_the_command_line_prints_settings_and_reports_bad_ones(capsys, monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    assert dataflow_command.main(["get", "job.region", "job.labels", "job.num_workers"]) == 0
    assert capsys.readouterr().out.splitlines() == ["europe-west4", '{"app": "tfrecord-pipeline", "env": "dev"}', ""]
    assert dataflow_command.main(["get", "job.regio"]) == 2
    assert "no setting 'job.regio'" in capsys.readouterr().err
    assert dataflow_command.main(["metadata", "inspect"]) == 2
    assert "command must be one of" in capsys.readouterr().err
    launch_body_argv = ["launch-body", "--spec", "gs://b/t.json", "--job-name", "j"]
    assert dataflow_command.main([*launch_body_argv, "--param", "inputs=x"]) == 2
    assert "not parameters of the refresh template" in capsys.readouterr().err
    assert dataflow_command.main([*launch_body_argv, "--param", "keep"]) == 2
    assert "--param takes NAME=VALUE, got 'keep'" in capsys.readouterr().err
    assert dataflow_command.main(["get", "job.region", "--set", "job.labels={a: ["]) == 2
    assert "--set job.labels={a: [: the value is not valid YAML: " in capsys.readouterr().err
    assert dataflow_command.main([*launch_body_argv, "--param", "keep=2"]) == 0
    launch = json.loads(capsys.readouterr().out)["launchParameter"]
    assert launch["parameters"]["keep"] == "2" and launch["parameters"]["kind"] == "images"
    assert launch["environment"]["ipConfiguration"] == "WORKER_IP_PRIVATE"


TIMED_FLUSH = "data_buffer_time_limit_ms=1000"  # starts Beam 2.77's racy flush thread in the SDK harness


def test_a_settings_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "dataflow.yaml"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "pipeline.dataflow", "get", "job.region", "--config", str(fifo)]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"error: cannot read {fifo}: not a regular file: a FIFO"


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"job:\n  region: europe-west4\xff\n", "is not UTF-8 text: byte 0xff at offset 27 (line 2)"),
        (
            b"job: [\n",
            "is not valid YAML: a structure YAML cannot parse (an unclosed bracket, a key without its colon?) "
            "at line 2",
        ),
    ],
)
def test_a_settings_file_that_is_not_utf8_or_not_yaml_is_refused_in_one_line(tmp_path, content, reason):
    path = tmp_path / "dataflow.yaml"
    path.write_bytes(content)
    argv = [sys.executable, "-m", "pipeline.dataflow", "get", "job.region", "--config", str(path)]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {path} {reason}") and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("experiments", [f"[use_runner_v2, {TIMED_FLUSH}]", TIMED_FLUSH, f"[a,{TIMED_FLUSH}]"])
def test_settings_refuse_an_experiment_that_drops_records_on_every_launch_path(experiments, capsys, monkeypatch):
    with pytest.raises(SettingsError, match="job.experiments: refusing .* dropped silently; drop the experiment"):
        settings(job__experiments=experiments)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    refused = ["--set", f"job.experiments={experiments}"]
    launch_body_argv = ["launch-body", "--spec", "gs://b/t.json", "--job-name", "j"]
    for what in (["beam-flags"], ["gcloud-flags"], launch_body_argv, ["get", "job.region"]):
        assert dataflow_command.main([*what, *refused]) == 2, what
        captured = capsys.readouterr()
        assert not captured.out and "dropped silently" in captured.err


def test_settings_keep_harmless_experiments():
    job = settings(job__experiments="[use_runner_v2, data_buffer_time_limit_ms=0]")["job"]
    assert {"--experiments=use_runner_v2", "--experiments=data_buffer_time_limit_ms=0"} <= set(beam_flags(job))
    assert launch_environment(job)["additionalExperiments"] == ["use_runner_v2", "data_buffer_time_limit_ms=0"]
    one = settings(job__experiments="use_runner_v2")["job"]  # a plain string is one experiment, not one per letter
    assert [f for f in beam_flags(one) if f.startswith("--experiments")] == ["--experiments=use_runner_v2"]


# -- building and staging the job -----------------------------------------------------------------


def test_dry_run_builds_the_dataflow_job_offline(tmp_path):
    config = load_config(None, {"input": str(small_input(tmp_path / "in")), "output": str(tmp_path / "out")})
    plan = make_plan(config)
    flags = beam_flags(settings(job__sdk_container_image=WORKER_IMAGE, job__setup_file="")["job"])
    p = beam.Pipeline(options=pipeline_options([*flags, "--dry_run=True"]))
    build_pipeline(p, plan, config, FolderPublication(plan.output, "run1"))
    job = p.run().job
    assert OUR_STEPS <= step_names(job.proto_pipeline)
    assert container_images(job.proto_pipeline) == {WORKER_IMAGE}

    # The same through the command line: exit 0, nothing written.
    assert main(["--input", plan.input, "--output", plan.output, *flags, "--dry_run=True"]) == 0
    assert not os.path.exists(plan.output)


@pytest.mark.parametrize(
    "experiments",
    [
        [f"--experiments={TIMED_FLUSH}"],
        ["--experiments", f"use_runner_v2,{TIMED_FLUSH}"],
        ["--experiments=use_runner_v2", f"--experiment={TIMED_FLUSH}"],
    ],
)
def test_the_dataflow_job_is_not_built_with_an_experiment_that_drops_records(experiments):
    flags = [*beam_flags(settings(job__sdk_container_image=WORKER_IMAGE, job__setup_file="")["job"]), "--dry_run=True"]
    with pytest.raises(UnsafeOptionError, match="dropped silently; drop the experiment"):
        pipeline_options([*flags, *experiments])  # the options run_job builds the Dataflow job from
    options = pipeline_options([*flags, "--experiments=data_buffer_time_limit_ms=0"]).get_all_options()
    assert options["runner"] == "DataflowRunner" and options["dry_run"]


def submit_script(*args) -> subprocess.CompletedProcess:
    """scripts/submit_dataflow.sh with `args`, against the emulator's environment."""
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "submit_dataflow.sh"), *map(str, args)],
        env={**os.environ, **ENV, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )


def test_submit_script_refuses_an_experiment_that_drops_records(tmp_path):
    out = tmp_path / "out"
    source = small_input(tmp_path / "in", per_class=1)
    result = submit_script(
        "--set", f"job.experiments=[{TIMED_FLUSH}]", "--input", source, "--output", out, "--dry_run=True"
    )
    assert result.returncode == 2, result.stderr
    assert "job.experiments: refusing the Beam experiment data_buffer_time_limit_ms=1000" in result.stderr
    assert not out.exists()


def test_submit_script_builds_the_job_from_the_settings_file(tmp_path):
    out = tmp_path / "out"
    settings = ["--set", "job.setup_file=", "--set", f"job.sdk_container_image={WORKER_IMAGE}"]
    result = submit_script(*settings, "--input", small_input(tmp_path / "in"), "--output", out, "--dry_run=True")
    assert result.returncode == 0, result.stderr
    assert "not run" in result.stdout and not out.exists()


def test_classic_template_staged_on_gcs_describes_steps_image_packaging_and_options(gcs_emulator, gcs_bucket, tmp_path):
    gcs_emulator.upload_dir(small_input(tmp_path / "in"), f"gs://{gcs_bucket}/raw")
    src = package_copy(tmp_path)
    body, proto = stage_template(
        gcs_emulator,
        gcs_bucket,
        ["--input", f"gs://{gcs_bucket}/raw", "--output", f"gs://{gcs_bucket}/tfrecords"],
        "convert",
        [f"--setup_file={src / 'setup.py'}", f"--sdk_container_image={WORKER_IMAGE}"],
    )

    assert OUR_STEPS <= step_names(proto)
    assert container_images(proto) == {WORKER_IMAGE}
    [pool] = body["environment"]["workerPools"]
    assert pool["workerHarnessContainerImage"] == WORKER_IMAGE
    assert {c["containerImage"] for c in pool["sdkHarnessContainerImages"]} == {WORKER_IMAGE}
    options = body["environment"]["sdkPipelineOptions"]["options"]
    assert options["project"] == "test-project" and options["region"] == "europe-west4"
    assert options["machine_type"] == "n2-standard-4" and options["max_num_workers"] == 20
    assert options["service_account_email"] == "tfrecord-dataflow@test-project.iam.gserviceaccount.com"
    assert options["subnetwork"] == "regions/europe-west4/subnetworks/private" and options["use_public_ips"] is False
    assert sorted(options["labels"]) == ["app=tfrecord-pipeline", "env=dev"]
    assert options["setup_file"] == str(src / "setup.py") and options["sdk_container_image"] == WORKER_IMAGE
    assert "transforms.gzip_codec.GzipCodecPlugin" in options["beam_plugins"]  # workers switch GZIP codecs at start
    assert not gcs_emulator.list_uris(f"gs://{gcs_bucket}/tfrecords/")  # staged, not run
    publication = _publication(proto)  # the job writes the manifest
    assert isinstance(publication, FolderPublication) and publication.output == f"gs://{gcs_bucket}/tfrecords"
    assert publication.unattended, "nobody waits for a template's job: a rejected run must fail it"

    # The package the workers install: the sdist built from setup.py, staged as workflow.tar.gz.
    [package] = [p for p in pool["packages"] if p["name"] == "workflow.tar.gz"]
    staged = package["location"].replace("storage.googleapis.com/", "gs://", 1)
    (tmp_path / "workflow.tar.gz").write_bytes(gcs_emulator.read_bytes(staged))
    with tarfile.open(tmp_path / "workflow.tar.gz") as sdist:
        names = sdist.getnames()
        [requires] = [n for n in names if n.endswith("egg-info/requires.txt")]
        requirements = sdist.extractfile(requires).read().decode()
    for module in ("pipeline/cli.py", "pipeline/publish.py", "pipeline/commands/refresh.py", "transforms/images.py"):
        assert any(n.endswith(module) for n in names), module
    assert not any("/tests/" in n or "/trainer/" in n for n in names)
    install_requires = requirements.split("\n[", 1)[0]  # extras ([test], [bench]) follow
    names = {re.split(r"[<>=!~\[; ]", line)[0] for line in install_requires.splitlines() if line}
    assert "apache-beam[gcp]==2.77.0" in install_requires and "tensorflow" not in names  # tensorflow-metadata is protos
    assert "isal" in install_requires


def _empty_class_folders(root: pathlib.Path, files: int) -> pathlib.Path:
    for i in range(files):
        folder = root / f"class{i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:06d}.jpg").touch()
    return root


def test_job_graph_does_not_grow_with_the_number_of_input_files(gcs_emulator, gcs_bucket, tmp_path):
    sizes = {}
    for files in (10, 10_000):
        source = _empty_class_folders(tmp_path / f"in{files}", files)
        config = load_config(None, {"input": str(source), "output": str(tmp_path / f"out{files}")})
        assert make_plan(config).listing.files == files
        body, proto = stage_template(
            gcs_emulator,
            gcs_bucket,
            ["--input", str(source), "--output", str(tmp_path / f"out{files}")],
            f"size{files}",
            [f"--sdk_container_image={WORKER_IMAGE}"],
        )
        sizes[files] = (proto.ByteSize(), len(json.dumps(body)), len(proto.components.transforms))
    print("staged sizes (pipeline proto bytes, template JSON chars, transforms):", sizes)
    (small_proto, small_json, small_steps), (large_proto, large_json, large_steps) = sizes[10], sizes[10_000]
    assert small_steps == large_steps
    # 1000x the files: a graph that held even a byte per file would be 9,990 bytes larger. Only
    # a few digits (counts, byte totals) differ in the pickled plan, and the run's random names
    # vary the compressed pickles by about a hundred bytes from one staging to the next.
    added = 10_000 - 10
    assert abs(large_proto - small_proto) < added // 10, sizes
    assert abs(large_json - small_json) < added // 10, sizes


def test_setup_py_builds_a_worker_wheel_without_tensorflow(tmp_path):
    src = package_copy(tmp_path)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    [wheel] = (tmp_path / "dist").glob("tfrecord_pipeline-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [line for line in zf.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    packaged = {
        "pipeline/cli.py",
        "pipeline/commands/refresh.py",
        "core/contract/versions.py",
        "pipeline/dataflow/flex_template.py",
        "transforms/images.py",
    }
    assert packaged <= set(names), packaged - set(names)
    assert {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n} == {"core", "pipeline", "transforms"}
    assert "Requires-Dist: apache-beam[gcp]==2.77.0" in requires
    tensorflow = [r for r in requires if re.match(r"Requires-Dist: tensorflow[<>=!~\[; ]", r)]
    assert all("extra ==" in r for r in tensorflow), requires  # only the test/bench extras


# -- a refresh launched as a (Flex) template ------------------------------------------------------


def _publication(proto: beam_runner_api_pb2.Pipeline):
    """The Publication the staged job's PublishManifest carries (a FolderPublication for a plain
    conversion, a VersionPublication for a refresh)."""
    for transform in proto.components.transforms.values():
        if transform.unique_name == "PublishManifest" and transform.spec.urn == "beam:transform:pardo:v1":
            payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
            return pickler.loads(payload.do_fn.payload)[0].publication
    raise AssertionError("no PublishManifest step")


def test_refresh_launched_as_a_template_stages_a_job_that_moves_latest_itself(gcs_emulator, gcs_bucket, tmp_path):
    gcs_emulator.upload_dir(small_input(tmp_path / "in", per_class=2), f"gs://{gcs_bucket}/raw")
    root = f"gs://{gcs_bucket}/datasets/shapes"
    argv = ["refresh", "--input", f"gs://{gcs_bucket}/raw", "--output", root, "--keep", "3"]

    # The launcher (a Flex Template launch stages the job the same way) does not wait for the job,
    # so the staged job itself must point LATEST at its version, after its manifest.
    _, proto = stage_template(gcs_emulator, gcs_bucket, argv, "refresh1")
    publication = _publication(proto)
    assert isinstance(publication, VersionPublication) and (publication.root, publication.keep) == (root, 3)
    assert publication.unattended
    # Nothing is written before the job runs but the sources the launcher listed, in the version's
    # folder, which the job checks and its manifest names (pipeline.source_list).
    assert gcs_emulator.list_uris(root + "/") == [f"{publication.folder}/{SOURCES_NAME}"]

    # Publish a version for real (local runner), then launch again with the input unchanged: the
    # launcher stages a one-step job that only reports "nothing changed", and writes nothing.
    assert main(argv) == 0
    before = {b.name: b.generation for b in gcs_emulator.list_blobs(root + "/")}
    assert f"{root}/{LATEST_NAME}".split("/", 3)[3] in before
    _, proto = stage_template(gcs_emulator, gcs_bucket, argv, "refresh2")
    assert step_names(proto) == {"NothingChanged", "Report"}
    assert {b.name: b.generation for b in gcs_emulator.list_blobs(root + "/")} == before


# -- the other scripts (printing their gcloud commands) -----------------------------------------


def _script(name: str, *args: str) -> str:
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / name), *args],
        env={**os.environ, **ENV, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_launch_and_schedule_scripts_print_the_gcloud_commands():
    out = _script(
        "launch_flex_template.sh",
        "--dry-run",
        "--refresh",
        "--input",
        "gs://b/raw",
        "--output",
        "gs://b/root",
        "--keep",
        "3",
        "--splits",
        "train=0.9,validation=0.1",
    )
    assert "gcloud dataflow flex-template run tfrecord-refresh-" in out
    assert "gs://test-bucket/dataflow/templates/tfrecord-refresh.json" in out
    assert r"\^~\^input=gs://b/raw~output=gs://b/root~keep=3~splits=train=0.9\,validation=0.1" in out
    assert "--disable-public-ips" in out and "--region=europe-west4" in out

    out = _script("schedule_refresh.sh", "--dry-run")
    body = json.loads(out[out.index("{") : out.rindex("}") + 1])
    launch = body["launchParameter"]
    assert launch["containerSpecGcsPath"] == "gs://test-bucket/dataflow/templates/tfrecord-refresh.json"
    assert set(launch["parameters"]) <= set(template_parameters("refresh"))
    assert launch["environment"]["serviceAccountEmail"] == "tfrecord-dataflow@test-project.iam.gserviceaccount.com"
    assert "gcloud scheduler jobs create http tfrecord-refresh-photos" in out
    assert "projects/test-project/locations/europe-west4/flexTemplates:launch" in out
    paused = _script("schedule_refresh.sh", "--dry-run", "--pause")
    assert "gcloud scheduler jobs pause tfrecord-refresh-photos" in paused
