"""The Flex Templates of `convert` and `refresh`: their parameters and metadata, made from the
conversion flag table (pipeline.flags) so that a template takes exactly the flags its command
does, and the entry point the template launcher runs (docker/flex_template/main.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from pipeline.flags import COMMAND_FLAGS, Flag

COMMANDS = tuple(COMMAND_FLAGS)
DESCRIPTIONS = {
    "convert": "Converts class folders of images, a CSV of image URIs, or tabular CSV files (gs://) into "
    "sharded GZIP TFRecords of tf.train.Example plus manifest.json.",
    "refresh": "Publishes a new version of a dataset: converts into OUTPUT/<UTC timestamp>/ and, only if the run "
    "succeeds, points OUTPUT/LATEST at it; skips unchanged input; keeps the newest KEEP versions.",
}
_REQUIRED_IN_TEMPLATE = {"input", "output"}  # the bundled sample and ./output are not in the image
_NOT_IN_TEMPLATE = {"promote"}  # a person's decision, made by hand: it runs no job for a template to stage
_TEMPLATE_HELP = {
    "config": "YAML file of settings: gs://... or a path in the image, e.g. configs/images.yaml; "
    "parameters override it",
}
_FLOAT = r"^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$"


class TemplateError(ValueError):
    """A command or parameter that the templates do not have."""


def truthy(value: Any) -> bool:
    """A switch given as text (a template parameter, a setting from the environment) or as a YAML boolean."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _flags(command: str) -> tuple[Flag, ...]:
    try:
        return tuple(flag for flag in COMMAND_FLAGS[command] if flag.name not in _NOT_IN_TEMPLATE)
    except KeyError:
        raise TemplateError(f"command must be one of {COMMANDS}, got {command!r}") from None


def template_parameters(command: str) -> list[str]:
    """Names of the template's parameters: exactly the command's own flags."""
    return [flag.name for flag in _flags(command)]


def _help(flag: Flag) -> str:
    text = _TEMPLATE_HELP.get(flag.name, flag.help.replace("%%", "%"))  # argparse help text escapes %
    if flag.name in _REQUIRED_IN_TEMPLATE:
        text = text.split("; default:")[0]  # local defaults do not apply in a template
    return text


def _regexes(flag: Flag) -> list[str]:
    """What the Dataflow console and API check a parameter's value against before a launch."""
    if flag.choices:
        return ["^(" + "|".join(re.escape(choice) for choice in flag.choices) + ")$"]
    if flag.switch:
        return ["^(true|false)$"]
    if flag.type is int:
        return ["^[0-9]+$"]
    if flag.type is float:
        return [_FLOAT]
    return []


def template_metadata(command: str) -> dict[str, Any]:
    """Flex Template metadata (docker/flex_template/<command>_metadata.json): one parameter per
    flag of the command, and no other."""
    parameters = []
    for flag in _flags(command):
        parameter = {
            "name": flag.name,
            "label": flag.name.replace("_", " ").capitalize(),
            "helpText": _help(flag),
            "isOptional": flag.name not in _REQUIRED_IN_TEMPLATE,
        }
        regexes = _regexes(flag)
        if regexes:
            parameter["regexes"] = regexes
        parameters.append(parameter)
    return {
        "name": f"tfrecord-pipeline {command}",
        "description": DESCRIPTIONS[command],
        "streaming": False,
        "parameters": parameters,
    }


def template_argv(
    command: str, argv: list[str], base_dir: str | os.PathLike = ".", fetch: Callable[[str], str] | None = None
) -> list[str]:
    """The launcher's `--name=value` arguments made fit for argparse: switch parameters
    (`--overwrite=true|false`) become a bare flag or nothing; `--config` may name a gs:// file
    (copied to a local temporary file) or a path relative to the template folder (`base_dir`)."""
    switches = {flag.name for flag in _flags(command) if flag.switch}
    out: list[str] = []
    for arg in argv:
        name, sep, value = arg.partition("=")
        if sep and name.startswith("--") and name[2:] in switches:
            if truthy(value):
                out.append(name)
            continue
        if sep and name == "--config":
            if "://" in value:
                value = (fetch or _fetch_to_temp)(value)
            elif not os.path.isabs(value) and os.path.exists(os.path.join(base_dir, value)):
                value = os.path.join(base_dir, value)  # e.g. configs/images.yaml in the image
            arg = f"--config={value}"
        out.append(arg)
    return out


def _fetch_to_temp(uri: str) -> str:
    # Beam is imported here only: the metadata and the settings helpers must not need it.
    from core import storage

    return storage.fetch_to_temp(uri, suffix=".yaml")


def flex_main(command: str, argv: list[str], base_dir: str | os.PathLike = ".") -> int:
    """What the Flex Template launcher runs (docker/flex_template/main.py): the command, as
    `python -m pipeline` would run it with these arguments."""
    # Imported here only: the command line loads Beam, which the metadata and settings helpers do not need.
    from pipeline.cli import main

    args = template_argv(command, argv, base_dir)
    return main(["refresh", *args] if command == "refresh" else args)
