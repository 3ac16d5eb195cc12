"""The `job:` settings of configs/cloud/dataflow.yaml as each launcher spells them: Beam flags for
`python -m pipeline --runner DataflowRunner`, flags of `gcloud dataflow flex-template run`, and the
`environment` of a flexTemplates:launch request (what Cloud Scheduler posts).

One table (JOB_KEYS) says, per setting, its name for each launcher and its shape; each shape has
one small renderer per launcher. A setting the table lacks is unknown to pipeline.dataflow.settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pipeline.dataflow.flex_template import TemplateError, template_parameters, truthy

Flags = Callable[[str, Any], list[str]]  # (the launcher's flag name, the setting's value) -> flags


@dataclasses.dataclass(frozen=True)
class Shape:
    """How one kind of setting becomes Beam flags, gcloud flags, and a launch environment value."""

    beam: Flags
    gcloud: Flags
    launch: Callable[[Any], Any]


def _flag(name: str, value: Any) -> list[str]:
    return [f"--{name}={value}"]


VALUE = Shape(beam=_flag, gcloud=_flag, launch=lambda value: value)
# One boolean setting; Beam has a flag and its negation, gcloud only a flag that turns public IPs off.
PUBLIC_IPS = Shape(
    beam=lambda name, on: [f"--{name}" if truthy(on) else f"--no_{name}"],
    gcloud=lambda name, on: [] if truthy(on) else [f"--{name}"],
    launch=lambda on: "WORKER_IP_PUBLIC" if truthy(on) else "WORKER_IP_PRIVATE",
)
# {label: value}; Beam repeats its flag, gcloud takes one comma-separated list.
LABELS = Shape(
    beam=lambda name, labels: [f"--{name}={k}={v}" for k, v in labels.items()],
    gcloud=lambda name, labels: [f"--{name}=" + ",".join(f"{k}={v}" for k, v in labels.items())],
    launch=lambda labels: {str(k): str(v) for k, v in labels.items()},
)
# [experiment, ...]; the same two spellings as labels.
EXPERIMENTS = Shape(
    beam=lambda name, items: [f"--{name}={item}" for item in items],
    gcloud=lambda name, items: [f"--{name}={','.join(items)}"],
    launch=list,
)


@dataclasses.dataclass(frozen=True)
class JobKey:
    """One `job:` setting. `name` is also its Beam option (these are pipeline options); `gcloud`
    and `launch` are None where that launcher has no such setting. `integer`: checked and
    converted when the settings are loaded."""

    name: str
    gcloud: str | None
    launch: str | None
    shape: Shape = VALUE
    integer: bool = False


# In the order the flags come out.
JOB_KEYS = (
    JobKey("project", "project", None),
    JobKey("region", "region", None),
    JobKey("temp_location", "temp-location", "tempLocation"),
    JobKey("staging_location", "staging-location", "stagingLocation"),
    JobKey("machine_type", "worker-machine-type", "machineType"),
    JobKey("num_workers", "num-workers", "numWorkers", integer=True),
    JobKey("max_num_workers", "max-workers", "maxWorkers", integer=True),
    JobKey("disk_size_gb", None, "diskSizeGb", integer=True),
    JobKey("service_account_email", "service-account-email", "serviceAccountEmail"),
    JobKey("network", "network", "network"),
    JobKey("subnetwork", "subnetwork", "subnetwork"),
    JobKey("use_public_ips", "disable-public-ips", "ipConfiguration", PUBLIC_IPS),
    JobKey("labels", "additional-user-labels", "additionalUserLabels", LABELS),
    JobKey("experiments", "additional-experiments", "additionalExperiments", EXPERIMENTS),
    JobKey("sdk_container_image", None, "sdkContainerImage"),
    JobKey("setup_file", None, None),  # Flex: FLEX_TEMPLATE_PYTHON_SETUP_FILE in the launcher image
)


def _given(job: Mapping[str, Any]) -> Iterator[tuple[JobKey, Any]]:
    """The settings that have a value: an empty one is left out, so the launcher's default applies."""
    for key in JOB_KEYS:
        value = job.get(key.name)
        if value is not None and value != "" and value != [] and value != {}:
            yield key, value


def beam_flags(job: Mapping[str, Any]) -> list[str]:
    """`--name=value` Beam flags for a DataflowRunner job."""
    flags = ["--runner=DataflowRunner"]
    for key, value in _given(job):
        flags += key.shape.beam(key.name, value)
    return flags


def gcloud_flags(job: Mapping[str, Any]) -> list[str]:
    """Flags of `gcloud dataflow flex-template run` (the job's settings; its parameters go in
    --parameters). The worker image, which gcloud has no flag for, goes in as the Beam option
    parameter sdk_container_image (see launch_flex_template.sh)."""
    flags = []
    for key, value in _given(job):
        if key.gcloud:
            flags += key.shape.gcloud(key.gcloud, value)
    return flags


def launch_environment(job: Mapping[str, Any]) -> dict[str, Any]:
    """The `environment` of a flexTemplates:launch request (FlexTemplateRuntimeEnvironment)."""
    return {key.launch: key.shape.launch(value) for key, value in _given(job) if key.launch}


def launch_body(
    settings: Mapping[str, Mapping[str, Any]], spec: str, job_name: str, parameters: Mapping[str, Any]
) -> dict[str, Any]:
    """The JSON body of POST .../locations/REGION/flexTemplates:launch of the refresh template."""
    accepted = template_parameters("refresh")
    unknown = set(parameters) - set(accepted)
    if unknown:
        raise TemplateError(
            f"refresh.parameters: {sorted(unknown)} are not parameters of the refresh template; it takes {accepted}"
        )
    return {
        "launchParameter": {
            "jobName": job_name,
            "containerSpecGcsPath": spec,
            "parameters": {k: _parameter_text(v) for k, v in parameters.items()},
            "environment": launch_environment(settings["job"]),
        }
    }


def _parameter_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):  # splits: {train: 0.8, validation: 0.2}
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)
