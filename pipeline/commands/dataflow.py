"""`python -m pipeline.dataflow`: the Google Cloud settings (configs/cloud/dataflow.yaml) printed
the way each script in scripts/ wants them, and the Flex Template metadata.

    python -m pipeline.dataflow beam-flags   [--config F] [--set job.KEY=VALUE ...]  # python -m pipeline (Dataflow)
    python -m pipeline.dataflow gcloud-flags [--config F] [--set ...]                # gcloud dataflow flex-template run
    python -m pipeline.dataflow launch-body  --spec GS_PATH --job-name NAME [--param K=V ...]  # flexTemplates:launch
    python -m pipeline.dataflow get KEY ...  [--config F]                            # values, e.g. images.repository
    python -m pipeline.dataflow metadata convert|refresh                             # Flex Template metadata JSON

Flags come out one per line (`--name=value`), for the scripts to read into arrays; empty settings
are left out. Exit code 2 (and a line on stderr) for bad settings or arguments.
"""

from __future__ import annotations

import argparse
import json
import sys

from core.shown import show
from pipeline.dataflow.flex_template import TemplateError, template_metadata
from pipeline.dataflow.launch_flags import beam_flags, gcloud_flags, launch_body
from pipeline.dataflow.settings import DEFAULT_CONFIG, SettingsError, load_settings, lookup
from pipeline.flags import OneLineParser

WHAT = ("beam-flags", "gcloud-flags", "launch-body", "get", "metadata")


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m pipeline.dataflow", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=WHAT)
    p.add_argument("keys", nargs="*", help="get: SECTION.KEY ... (one value a line); metadata: convert or refresh")
    p.add_argument("--config", help=f"settings YAML (default {DEFAULT_CONFIG})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a setting")
    p.add_argument("--spec", help="launch-body: gs:// path of the refresh template spec")
    p.add_argument("--job-name", help="launch-body: Dataflow job name")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="launch-body: template parameter (on top of refresh.parameters)",
    )
    return p


def _text(value) -> str:
    """One value of `get`, as a shell script reads it: mappings and lists as JSON."""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return "" if value is None else str(value)


def _print(args: argparse.Namespace) -> None:
    """Prints what `args.what` asks for, a line per flag or value (JSON: its lines, which hold no
    line break within a string)."""
    if args.what == "metadata":
        show(*json.dumps(template_metadata(args.keys[0] if args.keys else "convert"), indent=2).splitlines())
        return
    settings = load_settings(args.config, assignments=args.set)
    if args.what == "beam-flags":
        show(*beam_flags(settings["job"]))
    elif args.what == "gcloud-flags":
        show(*gcloud_flags(settings["job"]))
    elif args.what == "get":
        show(*(_text(lookup(settings, path)) for path in args.keys))
    else:
        if not args.spec or not args.job_name:
            raise SettingsError("launch-body needs --spec and --job-name")
        parameters = dict(settings["refresh"].get("parameters") or {})
        malformed = [assignment for assignment in args.param if "=" not in assignment]
        if malformed:
            raise SettingsError(f"--param takes NAME=VALUE, got {malformed[0]!r}")
        parameters.update(dict(assignment.split("=", 1) for assignment in args.param))
        show(*json.dumps(launch_body(settings, args.spec, args.job_name, parameters), indent=2).splitlines())


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        _print(args)
    except (SettingsError, TemplateError) as e:
        show(f"error: {e}", file=sys.stderr)
        return 2
    return 0
