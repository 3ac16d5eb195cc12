"""How text that comes from outside the program is shown: names on a terminal, in a summary or in
a log line (`printable`, the escaper), and the content of a user's file in a message or a report
(`quoted`, the describer). Standard library only: the trainer shows label names through it too.

Printing. A file name, a folder (label) name, a column name or a label may hold any character a
file system or a CSV allows: a newline forges a line of the summary, an escape sequence (`\\x1b[2J`)
clears the terminal, a bidi override (`\\u202e`) reverses what follows it. `printable` writes each
character that is not printable (str.isprintable: control characters C0 and C1, line and
paragraph separators, format characters such as bidi overrides and zero-width ones, spaces other
than the ordinary one, unassigned and private characters) as its escape, as repr does (`\\n`,
`\\x1b`, `\\u202e`; the byte a non-UTF-8 name held as `\\xNN`), and leaves every other character as
it is: é and 中文 stay readable. Every line a command prints goes through `show`, and every log
record through the formatter `printing` gives a handler: each escapes the whole line, so a line
is exactly one line whatever its names hold (a record's string arguments are escaped first, so
that the names they hold stay whole in a message cut to its first line).

Quoting. A message, a dead letter or a warning quotes the content of a user's file (a CSV cell,
a header, a settings value) only through `quoted`: as a literal, escaped, each string cut to
QUOTED_CHARACTERS and a sequence to its first QUOTED_ITEMS, and only text established to be
text: a string holding bytes that were not UTF-8 (CSV rows are read with surrogate escapes) is
described by its length, never quoted. Bytes are never quoted: a file that should be text and is
not is named by its kind (core.file_signatures). A settings file that failed to parse, or that is
a key given as settings, is quoted not at all (core.local_files.load_yaml).
"""

from __future__ import annotations

import logging
import reprlib
import sys
from typing import Any, TextIO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUOTED_CHARACTERS = 100  # of one string that `quoted` shows
QUOTED_ITEMS = 10  # of a sequence
_SURROGATE_ESCAPES = range(0xDC80, 0xDD00)  # the bytes 0x80..0xff of a name that is not UTF-8

_QUOTED = reprlib.Repr()
_QUOTED.maxstring, _QUOTED.maxother, _QUOTED.maxlong = QUOTED_CHARACTERS, QUOTED_CHARACTERS, QUOTED_CHARACTERS
_QUOTED.maxlist = _QUOTED.maxtuple = _QUOTED.maxdict = _QUOTED.maxset = QUOTED_ITEMS
_QUOTED.maxlevel = 2


def printable(text: str) -> str:
    """`text` with every character that is not printable written as its escape (module docstring)."""
    if text.isprintable():  # most names: nothing to escape
        return text
    return "".join(character if character.isprintable() else _escape(character) for character in text)


def _escape(character: str) -> str:
    if ord(character) in _SURROGATE_ESCAPES:
        return f"\\x{ord(character) - 0xDC00:02x}"
    return repr(character)[1:-1]


def is_text(value: str) -> bool:
    """Whether a string read from a file holds only text: no surrogate escapes of bytes that were
    not UTF-8."""
    if value.isascii():  # most values: O(1)
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def quoted(value: Any) -> str:
    """`value`, content of a user's file (a string, a number, or a sequence or mapping of them), as
    a message shows it: a bounded, escaped literal (module docstring); a sequence of more than
    QUOTED_ITEMS says how many it holds. A string that is not text (is_text), or a sequence holding
    one, is described instead."""
    if isinstance(value, str) and not is_text(value):
        return f"a value of {len(value):,} characters that is not UTF-8 text"
    if isinstance(value, (list, tuple)):
        if not all(is_text(item) for item in value if isinstance(item, str)):
            return f"{len(value):,} values, not all of them UTF-8 text"
        whole = f" ({len(value):,} in all)" if len(value) > QUOTED_ITEMS else ""
        return _QUOTED.repr(list(value)) + whole
    return _QUOTED.repr(value)


def show(*lines: str, file: TextIO | None = None) -> None:
    """Writes each line, made printable, on a line of its own to `file` (stdout by default): how
    the commands print."""
    stream = file or sys.stdout
    stream.write("".join(printable(line) + "\n" for line in lines))
    stream.flush()


class _PrintableArgs(logging.Filter):
    """Makes a record's string arguments printable before any other filter reads its message: a
    name with a newline in it stays on its line, where a filter that keeps a message's first line
    (pipeline.cli.OneLine) would otherwise cut it there."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(printable(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


class _PrintableFormatter(logging.Formatter):
    """LOG_FORMAT, each record's message made printable whole (a newline in it is `\\n`), and each
    line of a traceback (--debug) made printable by itself."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)

    def formatException(self, ei) -> str:
        return "\n".join(map(printable, super().formatException(ei).splitlines()))

    def formatStack(self, stack_info: str) -> str:
        return "\n".join(map(printable, stack_info.splitlines()))


def printing(handler: logging.Handler) -> logging.Handler:
    """`handler`, formatting records as LOG_FORMAT with their messages made printable: every
    handler a command logs to. Its first filter makes the records' string arguments printable."""
    handler.addFilter(_PrintableArgs())
    handler.setFormatter(_PrintableFormatter(LOG_FORMAT))
    return handler
