"""A command that runs locally on local data starts without the modules of Beam it never calls.

`import apache_beam` loads Beam's Google Cloud I/O (GCS, BigQuery, Pub/Sub), the Dataflow API
client and Google's older API client (apitools) whenever the gcp extra is installed, as it is here,
and the libraries of Beam's other integrations whenever they are installed, as on most ML
workstations: pandas and pyarrow (DataFrame and Arrow type hints, Parquet I/O), pymongo (MongoDB
I/O). That is a large share of a local run's start-up (docs/performance.md) for modules such a run
never calls. Beam imports each of them inside `try ... except ImportError` (apache_beam/io/__init__.py,
io/filesystems.py, io/mongodbio.py, io/parquetio.py, typehints/__init__.py,
runners/dataflow/dataflow_runner.py, utils/retry.py, the BundleBasedDirectRunner's Pub/Sub
overrides), as for an installation without them. So the process entry (pipeline.__main__, through
pipeline.beam_patches), before anything imports Beam, makes LEFT_OUT (but for STILL_IMPORTABLE)
unimportable when its command line can touch nothing remote (`needs_cloud`): Beam then starts as
it would without them.

The lean local runner only: `--runner` (named runners take other paths through Beam, some of which
import Pub/Sub unguarded) and `--direct_num_workers` (the FnApiRunner) keep every module, as does
anything that names a remote path or may find one in its data (an image CSV lists its images'
URIs). A module this leaves out fails loudly if something imports it anyway.
"""

from __future__ import annotations

import argparse
import importlib.abc
import logging
import sys

from core.local_files import load_yaml
from pipeline.flags import COMMAND_FLAGS, DEBUG_FLAG

CLOUD_PACKAGES = ("apache_beam.io.gcp", "google.cloud", "apitools")
INTEGRATION_PACKAGES = ("pandas", "pyarrow", "pymongo", "bson")  # bson: pymongo's
LEFT_OUT = CLOUD_PACKAGES + INTEGRATION_PACKAGES
# Left importable: Beam's core imports its Pub/Sub module unguarded wherever it looks for Pub/Sub
# sources and sinks (apache_beam/io/iobase.py: every Beam Write, on expanding),
# and that module imports google.cloud.pubsub only inside `try`.
STILL_IMPORTABLE = ("apache_beam.io.gcp", "apache_beam.io.gcp.pubsub")
_BEAM_RUNNER_FLAGS = ("--runner", "--direct_num_workers")


class _Unparsed(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Parses as the command will (abbreviations included), raising instead of exiting: the
    command itself reports a bad command line."""

    def error(self, message):
        raise _Unparsed(message)


def needs_cloud(argv: list[str]) -> bool:
    """Whether a `python -m pipeline` command line may touch Google Cloud or a runner other than
    the lean local one. False only for `convert` and `refresh` of local paths (the given or
    configured input and output) of a kind other than image_csv, with no remote path in any
    argument, on the default local runner; True whenever that cannot be told (a config file that
    does not read, a flag that does not parse)."""
    argv = [arg for arg in argv if arg != DEBUG_FLAG]  # as pipeline.cli takes it out
    command, args = (argv[0], argv[1:]) if argv and not argv[0].startswith("-") else ("convert", argv)
    if command not in COMMAND_FLAGS or any("://" in arg for arg in args):
        return True
    parser = _Parser(add_help=False)
    for flag in COMMAND_FLAGS[command]:
        flag.add_to(parser)
    try:
        ours, beam_args = parser.parse_known_args(args)
        configured = _config_file(ours.config) if ours.config else {}
    except (_Unparsed, OSError, ValueError):
        return True
    if any(arg.split("=", 1)[0] in _BEAM_RUNNER_FLAGS for arg in beam_args):
        return True
    kind = ours.kind or configured.get("kind")
    paths = (ours.input or configured.get("input"), ours.output or configured.get("output"))
    return kind == "image_csv" or any("://" in str(path) for path in paths if path)


def _config_file(path: str) -> dict:
    """The config file's settings. One that is not a regular file raises NotARegularFile (an
    OSError) instead of waiting on a FIFO or reading a device, one that is not UTF-8 or not YAML
    NotYaml (a ValueError): needs_cloud then keeps the modules, and the command refuses the file."""
    values = load_yaml(path)
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: not a mapping")
    return values


class _LeftOut(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in STILL_IMPORTABLE:
            return None
        if any(name == package or name.startswith(package + ".") for package in LEFT_OUT):
            raise ModuleNotFoundError(f"No module named {name!r} (left out: pipeline.unused_modules)", name=name)
        return None


def leave_out_unless_needed(argv: list[str]) -> bool:
    """Makes LEFT_OUT (but for STILL_IMPORTABLE) unimportable in this process unless
    `needs_cloud(argv)`, or Beam is imported already (its modules are then loaded, or left out by
    Beam's own choice). True if it did."""
    if "apache_beam" in sys.modules or needs_cloud(argv):
        return False
    sys.meta_path.insert(0, _LeftOut())
    # Beam warns on import when MongoDB I/O finds no bson: news to no one in a run that left it out.
    logging.getLogger("apache_beam.io.mongodbio").setLevel(logging.ERROR)
    return True
