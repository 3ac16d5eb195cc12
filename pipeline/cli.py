"""Command line: `python -m pipeline [convert] [convert flags]`, `python -m pipeline refresh ...` and
`python -m pipeline inspect DEST ...` (pipeline.commands). Sets up logging and dispatches. The
process entry (`python -m pipeline`, the installed `tfrecord-pipeline`) is pipeline.__main__, which
decides what Beam may import (pipeline.unused_modules) before it imports this module.

Without `--debug` (accepted anywhere on the line) every log record is one line, tracebacks
included (Beam logs a failing bundle's traceback at each retry), and an unexpected error ends
the command with one line and exit 3; with it, everything in full. How a command ends, and its
exit codes (SIGTERM's 143 among them): pipeline.ending. Either way a record's message is
printable (core.shown.printing): a name in it that holds a newline or an escape sequence shows
them escaped, so it neither forges a line nor drives the terminal.
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
from collections.abc import Callable

from core.shown import printing
from pipeline.ending import end, terminations_end_the_run
from pipeline.flags import COMMANDS, DEBUG_FLAG
from pipeline.report import first_line
from pipeline.runners import HideInMemoryWorkersWarning, limit_malloc_arenas
from transforms import progress
from transforms.stopping import Stopped

# Sub-commands named by the first argument; anything else is the conversion's flags.
SUBCOMMANDS = tuple(COMMANDS)

_LOG = logging.getLogger("pipeline")


class OneLine(logging.Filter):
    """Keeps the first line of a record (first_line) and drops its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        first = first_line(message)
        if record.exc_info or first != message:
            record.msg, record.args = f"{first} ({DEBUG_FLAG} for details)", ()
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


class QuietStops(logging.Filter):
    """Drops records of a Stopped (transforms.stopping): Beam logs each DoFn's exception as it
    re-raises it, and a stopped run's only line is the command's own."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], Stopped))


def _set_up_logging(debug: bool) -> None:
    logging.basicConfig(
        level=logging.INFO,
        handlers=[printing(progress.ConsoleHandler(sys.stderr))],  # on a terminal, records go above the bars
    )
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    logging.getLogger(HideInMemoryWorkersWarning.LOGGER).addFilter(HideInMemoryWorkersWarning())
    _filter_every_handler(QuietStops)
    if not debug:
        _filter_every_handler(OneLine)


def _filter_every_handler(kind: type[logging.Filter]) -> None:
    """Adds a `kind` filter to each handler of the root logger that has none yet (once per
    process, however many commands the process runs)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, kind) for f in handler.filters):
            handler.addFilter(kind())


def run(command_main: Callable[[list[str]], int], argv: list[str]) -> int:
    """What every entry point shares: logging, `--debug`, and one line (exit 3) for an error the
    command did not expect."""
    limit_malloc_arenas()
    debug = DEBUG_FLAG in argv
    _set_up_logging(debug)
    try:
        with terminations_end_the_run():  # SIGTERM ends a run as Ctrl-C does (pipeline.ending)
            return end(command_main([arg for arg in argv if arg != DEBUG_FLAG]))
    except (KeyboardInterrupt, Exception) as e:
        if debug:
            raise
        return end(e)  # a run's interrupt says what DEST holds (pipeline.ending); a plain one how it ended
    finally:
        progress.close_all()


def _dispatch(argv: list[str]) -> int:
    command, args = (argv[0], argv[1:]) if argv and argv[0] in SUBCOMMANDS else ("convert", argv)
    # Imported on demand: inspect imports TensorFlow, which a conversion never needs.
    return importlib.import_module(f"pipeline.commands.{command}").main(args)


def main(argv: list[str] | None = None) -> int:
    return run(_dispatch, sys.argv[1:] if argv is None else argv)


def exit_with_main() -> None:
    """The process' entry (`python -m pipeline`, `tfrecord-pipeline`): main, then exit. What the
    process made (Beam's modules, the job's graph) is frozen first: the interpreter's last garbage
    collection would walk all of it, for nothing, just before the process ends (README,
    Performance)."""
    code = main()
    gc.freeze()
    sys.exit(code)
