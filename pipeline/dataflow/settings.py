"""Loading configs/cloud/dataflow.yaml: the Google Cloud settings of the scripts in scripts/.

The YAML holds placeholders, never a real project: `${NAME}` is the environment variable NAME
(an error naming it when unset) and `${NAME:-default}` falls back to `default`. `--set
SECTION.KEY=VALUE` overrides a setting. Unknown sections and keys are errors, as in the
conversion config; the `job:` keys are the rows of pipeline.dataflow.launch_flags.JOB_KEYS.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from core.local_files import NotYaml, load_yaml, parse_yaml
from core.shown import quoted
from pipeline.dataflow.launch_flags import JOB_KEYS

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO_ROOT / "configs" / "cloud" / "dataflow.yaml"  # configs/*.yaml are conversion configs
SECTIONS: dict[str, set[str]] = {
    "job": {key.name for key in JOB_KEYS},
    "images": {"repository", "tag"},
    "templates": {"location"},
    "refresh": {
        "parameters",
        "schedule",
        "time_zone",
        "scheduler_job",
        "scheduler_location",
        "scheduler_service_account",
        "job_name",
    },
}
_INTEGER_KEYS = {key.name for key in JOB_KEYS if key.integer}

# Innermost placeholders first (a default holds no braces), so defaults may nest placeholders.
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^${}]*))?\}")


class SettingsError(ValueError):
    pass


def expand(value: Any, environ: Mapping[str, str], missing: set[str]) -> Any:
    """`${NAME}` / `${NAME:-default}` replaced in every string of a YAML value; the names of unset
    variables without a default are added to `missing`."""
    if isinstance(value, str):

        def substitute(m: re.Match) -> str:
            name, default = m.group(1), m.group(2)
            if environ.get(name, "") != "":
                return environ[name]
            if default is not None:
                return default
            missing.add(name)
            return ""

        while True:
            expanded = _PLACEHOLDER.sub(substitute, value)
            if expanded == value:
                return expanded
            value = expanded
    if isinstance(value, Mapping):
        return {k: expand(v, environ, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, environ, missing) for v in value]
    return value


def _apply_assignment(raw: dict, assignment: str) -> None:
    """`section.key=value` (value parsed as YAML: numbers, booleans, {a: b}, [x])."""
    path, sep, text = assignment.partition("=")
    section, dot, key = path.partition(".")
    if not sep or not dot:
        raise SettingsError(f"--set expects SECTION.KEY=VALUE, got {quoted(assignment)}")
    try:
        raw.setdefault(section, {})[key] = parse_yaml(text) if text else ""
    except NotYaml as e:
        raise SettingsError(f"--set {assignment}: the value {e}") from e


def _check_keys(path: str | os.PathLike, settings: Mapping[str, Mapping[str, Any]]) -> None:
    for section, values in settings.items():
        bad = set(values) - SECTIONS[section]
        if bad:
            raise SettingsError(
                f"{path}: {section}: unknown key(s) {quoted(sorted(bad))}; known: {sorted(SECTIONS[section])}"
            )


def _check_job(job: dict[str, Any]) -> None:
    """Integers made integers, setup_file made absolute, labels a mapping, experiments a list and
    none that pipeline.runners refuses (in place)."""
    for key in _INTEGER_KEYS & set(job):
        if job[key] not in ("", None):
            try:
                job[key] = int(job[key])
            except (TypeError, ValueError) as e:
                raise SettingsError(f"job.{key} must be an integer, got {quoted(job[key])}") from e
    setup_file = job.get("setup_file")
    if setup_file and not os.path.isabs(setup_file):  # relative to the repository, not the caller's folder
        job["setup_file"] = str(REPO_ROOT / setup_file)
    if not isinstance(job.get("labels") or {}, Mapping):
        raise SettingsError("job.labels must be a mapping of label: value")
    if isinstance(job.get("experiments"), str) and job["experiments"]:  # `--set job.experiments=a,b`
        job["experiments"] = [job["experiments"]]  # one item, not one per character
    if job.get("experiments"):
        _check_experiments(job["experiments"])


def _check_experiments(experiments: list[Any]) -> None:
    """job.experiments reach the workers' SDK harness three ways: Beam's --experiments (submit),
    gcloud's --additional-experiments (Flex Template run) and the launch request's
    additionalExperiments (scheduled refresh). So the experiments pipeline.runners refuses are
    refused here, before any of them is rendered."""
    # Imported here only, when there are experiments: pipeline.runners loads Beam, which settings do not need.
    from pipeline.runners import UnsafeOptionError, check_experiments

    try:
        check_experiments(experiments)
    except UnsafeOptionError as e:
        raise SettingsError(f"job.experiments: {e}") from e


def load_settings(
    path: str | os.PathLike | None = None,
    environ: Mapping[str, str] | None = None,
    assignments: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """The YAML at `path` (default: DEFAULT_CONFIG) with `assignments` applied and placeholders
    expanded (from `environ`, default os.environ); checked. Every section is present."""
    path = path or DEFAULT_CONFIG
    try:  # a FIFO or device (or a link to one) is refused, not waited on (core.local_files)
        raw = load_yaml(str(path)) or {}
    except OSError as e:
        raise SettingsError(f"cannot read {path}: {e}") from e
    except NotYaml as e:
        raise SettingsError(f"{path} {e}") from e
    if not isinstance(raw, dict):
        raise SettingsError(f"{path}: expected a mapping of sections {sorted(SECTIONS)}")
    for assignment in assignments:
        _apply_assignment(raw, assignment)
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise SettingsError(f"{path}: unknown section(s) {quoted(sorted(unknown))}; known: {sorted(SECTIONS)}")
    missing: set[str] = set()
    environ = os.environ if environ is None else environ
    settings = {section: expand(dict(raw.get(section) or {}), environ, missing) for section in SECTIONS}
    _check_keys(path, settings)
    if missing:
        raise SettingsError(
            f"{path}: set the environment variable(s) {', '.join(sorted(missing))} "
            "(the config holds placeholders, not project names)"
        )
    _check_job(settings["job"])
    if not isinstance(settings["refresh"].get("parameters") or {}, Mapping):
        raise SettingsError("refresh.parameters must be a mapping of template parameter: value")
    return settings  # refresh.parameters are checked against the template by launch_body


def lookup(settings: Mapping[str, Mapping[str, Any]], path: str) -> Any:
    """The value of `SECTION.KEY` ("" when unset)."""
    section, _, key = path.partition(".")
    if key not in SECTIONS.get(section, ()):
        raise SettingsError(f"no setting {quoted(path)}")
    return settings[section].get(key, "")
