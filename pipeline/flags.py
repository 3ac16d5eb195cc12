"""The flags of the conversion commands, as data: one table builds the argparse parsers of
`convert` and `refresh` and the Flex Template metadata (pipeline.dataflow.flex_template), so a
template always takes exactly the flags the command does.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from core.contract.layout import FILE_FORMATS
from core.contract.manifest import KINDS
from core.shown import show
from transforms.folder_layout import LAYOUTS

INSTALLED_COMMAND = "tfrecord-pipeline"  # setup.py's console script
DEBUG_FLAG = "--debug"  # accepted anywhere on any command's line, taken out before parsing (pipeline.cli)
DEBUG_HELP = f"{DEBUG_FLAG}, anywhere on the line: tracebacks and multi-line log records in full."
ALLOW_OTHER_FILES = "allow_other_files"  # the flag an --output holding the user's files needs (pipeline.preflight)
# The commands of `python -m pipeline` (pipeline.cli dispatches on the first argument), each with
# the line that introduces it in every help that lists them.
COMMANDS = {
    "convert": "convert images or CSV files into sharded TFRecords with a manifest (the default command)",
    "refresh": "publish a new version of a dataset under ROOT and move ROOT/LATEST to it; skips unchanged input",
    "inspect": "show what a converted dataset holds; --verify reads every record back",
}


def command_name(subcommand: str = "") -> str:
    """The command as the user typed it, for usage lines: the installed one or `python -m pipeline`."""
    base = INSTALLED_COMMAND if os.path.basename(sys.argv[0]) == INSTALLED_COMMAND else "python -m pipeline"
    return f"{base} {subcommand}".strip()


def folder_list(text: str) -> list[str]:
    """'a,gs://b/c' -> ['a', 'gs://b/c']"""
    return [part.strip() for part in text.split(",") if part.strip()]


def split_fractions(text: str) -> dict[str, float]:
    """'train=0.8,validation=0.2' -> {'train': 0.8, 'validation': 0.2}"""
    try:
        return {name.strip(): float(value) for name, value in (part.split("=") for part in text.split(","))}
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected name=fraction,... got {text!r}") from e


@dataclasses.dataclass(frozen=True)
class Flag:
    """One `--name` flag. `switch`: a bare flag that sets True (a "true|false" template parameter).
    `setting`: the config key it sets, dotted (`sharding.num_shards`), when not its name."""

    name: str
    help: str
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] = ()
    switch: bool = False
    setting: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        """Where in the config the flag's value goes: ('sharding', 'num_shards'), ('overwrite',)."""
        return tuple((self.setting or self.name).split("."))

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.switch:
            parser.add_argument(f"--{self.name}", action="store_true", default=None, help=self.help)
        else:
            parser.add_argument(f"--{self.name}", type=self.type, choices=self.choices or None, help=self.help)


CONVERT_FLAGS = (
    Flag(
        "input", "folder of class folders, image CSV, or CSV file pattern (local or gs://); default: the bundled sample"
    ),
    Flag("output", "dataset folder (local or gs://); default: output/sample[_KIND]"),
    Flag("kind", "images (class folders, the default), image_csv, or csv (tabular)", choices=KINDS),
    Flag("config", "YAML file of settings (see configs/); flags override it"),
    Flag(
        "layout",
        "images: class_folders (SRC/<label>/...), split_folders (SRC/<split>/<label>/...), or auto (the default: "
        "split folders when the folders below SRC are named train, val, test, ...)",
        choices=LAYOUTS,
        setting="image.layout",
    ),
    Flag("splits", "split fractions, e.g. train=0.8,validation=0.2 (class folders and CSVs)", type=split_fractions),
    Flag(
        "label",
        "csv: the column of each row's class (its values become class ids, named in the manifest) or target; "
        "default: the column named label, if any",
        setting="csv.label",
    ),
    Flag(
        "num_shards",
        "shards per split (overrides the computed count; 0: computed)",
        type=int,
        setting="sharding.num_shards",
    ),
    Flag(
        "reader_hosts",
        "hosts that will read the data (>= shards_per_host shards each)",
        type=int,
        setting="sharding.reader_hosts",
    ),
    Flag("target_shard_mib", "target shard size in MiB (default 128)", type=float, setting="sharding.target_shard_mib"),
    Flag(
        "max_error_fraction",
        "fail the run (exit 1, after writing the report) above this fraction of bad sources (default 0.01)",
        type=float,
    ),
    Flag("overwrite", "replace a dataset already in --output", switch=True),
    Flag(
        "image_roots",
        "image_csv: folders (local or gs://) rows may name images below besides the CSV's own, DIR[,DIR...] "
        "(image_csv.roots)",
        type=folder_list,
        setting="image_csv.roots",
    ),
    Flag(
        ALLOW_OTHER_FILES,
        "write into an --output folder that holds files or folders of yours besides (they stay as they are)",
        switch=True,
    ),
    Flag(
        "format",
        "tfrecord (the default) or array_record (ArrayRecord files: random access with Grain, TFDS data_source)",
        choices=FILE_FORMATS,
    ),
    Flag(
        "compression",
        "gzip (the default for tfrecord) or none (TFDS, TPU reference readers, indexes; array_record's only)",
        choices=("gzip", "none"),
    ),
    Flag(
        "index",
        "also write index/<shard>.idx record indexes (DALI, PyTorch tfrecord; needs --compression none)",
        switch=True,
    ),
    Flag(
        "lease_seconds",
        "how long a run that stops renewing its lease on the output (a suspended machine) keeps it (default 300)",
        type=int,
    ),
    Flag("listing_threads", "list requests in flight at once, on the launcher and in the job (default 16)", type=int),
)
_REFRESH_HELP = {
    "output": "ROOT: the folder (local or gs://) that holds the versions and LATEST",
    ALLOW_OTHER_FILES: "keep the versions in a ROOT that holds files or folders of yours besides",
    "overwrite": "no effect: a refresh always writes a new version folder",
}
REFRESH_FLAGS = (
    *(dataclasses.replace(f, help=_REFRESH_HELP.get(f.name, f.help)) for f in CONVERT_FLAGS),
    Flag(
        "keep",
        "retention: keep the newest KEEP versions (never deleting the one LATEST names, nor a held one newer "
        "than it); default: keep all",
        type=int,
    ),
    Flag(
        "promote",
        "point OUTPUT/LATEST at version PROMOTE (a held one, after you have looked at its report) and exit; "
        "needs only --output",
    ),
)
COMMAND_FLAGS = {"convert": CONVERT_FLAGS, "refresh": REFRESH_FLAGS}


def commands_help() -> str:
    """The commands, one line each: what the top-level help (convert's) lists."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {summary}" for name, summary in COMMANDS.items()]
    return "\n".join([f"commands ({command_name()} COMMAND --help: its flags):", *lines])


class OneLineParser(argparse.ArgumentParser):
    """A parser whose mistakes end the command in one line (exit 2), naming `--help`: argparse's own
    prints the usage block first, dozens of lines above the one that says what is wrong."""

    def error(self, message: str):
        show(f"{self.prog}: error: {message} ({self.prog} --help lists the flags)", file=sys.stderr)
        self.exit(2)


def make_parser(prog: str, description: str, flags: Iterable[Flag]) -> argparse.ArgumentParser:
    """A conversion command's parser; `description` is printed as written (line breaks kept)."""
    parser = OneLineParser(
        prog=prog,
        description=description,
        epilog="Other flags must be Apache Beam options (e.g. --runner DataflowRunner); anything else is "
        f"refused.\n{DEBUG_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag in flags:
        flag.add_to(parser)
    return parser


def parse_command_line(
    parser: argparse.ArgumentParser, flags: Iterable[Flag], argv: list[str]
) -> tuple[argparse.Namespace, list[str]]:
    """Our flags, and the rest for Beam. An argument that neither defines (a typo such as
    `--ouput`, which Beam would only warn about) ends the command with exit 2 and the closest
    known flags; so does a Beam option that does not parse (`--dry_run` without its value), in
    our parser's one line rather than Beam's usage block of every option it has."""
    from pipeline.runners import beam_flag_names, unknown_beam_args  # Beam: only for commands that run a job

    args, rest = parser.parse_known_args(argv)
    unknown = unknown_beam_args(rest, lambda message: parser.error(f"Beam's {message}"))
    if unknown:
        name = unknown[0].split("=", 1)[0]
        ours = [f"--{flag.name}" for flag in flags]
        close = difflib.get_close_matches(name, ours + beam_flag_names(), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        parser.error(f"unrecognized argument {unknown[0]} (neither a flag of ours nor a Beam option){hint}")
    return args, rest


def config_overrides(args: argparse.Namespace) -> dict:
    """The conversion flags that were given, shaped like the YAML config (Flag.key)."""
    overrides: dict = {}
    for flag in CONVERT_FLAGS:
        value = getattr(args, flag.name)
        if flag.name != "config" and value is not None:
            *sections, name = flag.key
            place = overrides
            for section in sections:
                place = place.setdefault(section, {})
            place[name] = value
    return overrides
