"""Command line: `python -m pipeline [convert] [convert flags]`, `python -m pipeline refresh ...` and
`python -m pipeline inspect DEST ...` (pipeline.commands). Sets up logging and dispatches. The
process entry (`python -m pipeline`, the installed `tfrecord-pipeline`) is pipeline.__main__, which
decides what Beam may import (pipeline.unused_modules) before it imports this module.

Without `--debug` (accepted anywhere on the line) every log record is one line, tracebacks
included (Beam logs a failing bundle's traceback at each retry), and an unexpected error ends
the command with one line and exit 3 (pipeline.job's exit codes); with it, everything in full.
Either way a record's message is printable (core.shown.printing): a name in it that holds a
newline or an escape sequence shows them escaped, so it neither forges a line nor drives the
terminal.
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
from collections.abc import Callable

from core.shown import printing
from pipeline.flags import COMMANDS, DEBUG_FLAG
from pipeline.job import EXIT_FAILED
from pipeline.runners import HideInMemoryWorkersWarning, limit_malloc_arenas
from transforms import progress
from transforms.stopping import Stopped

# Sub-commands named by the first argument; anything else is the conversion's flags.
SUBCOMMANDS = tuple(COMMANDS)

EXIT_INTERRUPTED = 130  # a shell's code for a command stopped by Ctrl-C (128 + SIGINT)
LEAD_IN_LINES = 5  # of a message whose first line only introduces the lines after it, how many are kept
_LOG = logging.getLogger("pipeline")


def first_line(message: str) -> str:
    """A message on one line: its first line, and when that only introduces the lines after it
    (it ends in ":", as Beam's "Pipeline has validations errors:" does before naming each missing
    option), those too, up to LEAD_IN_LINES of them, joined by "; "."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines or not lines[0].endswith(":") or len(lines) == 1:
        return message.splitlines()[0] if message else message
    more = "; ..." if len(lines) > 1 + LEAD_IN_LINES else ""
    return f"{lines[0]} {'; '.join(lines[1 : 1 + LEAD_IN_LINES])}{more}"


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
        return command_main([arg for arg in argv if arg != DEBUG_FLAG])
    except KeyboardInterrupt as e:
        if debug:
            raise
        # A run says how its interrupt left the output (pipeline.job); a plain Ctrl-C carries no words.
        _LOG.error("%s", str(e) or "interrupted (a run cleans up what it wrote before it stops)")
        return EXIT_INTERRUPTED
    except Exception as e:
        if debug:
            raise
        # Its lines joined here (first_line), as the record's arguments are escaped whole before
        # OneLine reads the message; exc_info: OneLine says --debug shows the rest.
        _LOG.error("%s: %s", type(e).__name__, first_line(str(e).strip() or "(no message)"), exc_info=True)
        return EXIT_FAILED
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
