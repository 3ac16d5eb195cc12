"""Command line: `python -m pipeline [convert flags]`, `python -m pipeline refresh ...` and
`python -m pipeline inspect DEST ...` (pipeline.commands). Sets up logging and dispatches.
"""

from __future__ import annotations

import importlib
import logging
import sys

from pipeline.runners import HideInMemoryWorkersWarning, limit_malloc_arenas

# Sub-commands named by the first argument; anything else is the conversion's flags.
SUBCOMMANDS = ("refresh", "inspect")


def _set_up_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    logging.getLogger(HideInMemoryWorkersWarning.LOGGER).addFilter(HideInMemoryWorkersWarning())


def main(argv: list[str] | None = None) -> int:
    limit_malloc_arenas()
    _set_up_logging()
    argv = sys.argv[1:] if argv is None else argv
    command, args = (argv[0], argv[1:]) if argv and argv[0] in SUBCOMMANDS else ("convert", argv)
    # Imported on demand: inspect imports TensorFlow, which a conversion never needs.
    return importlib.import_module(f"pipeline.commands.{command}").main(args)
