"""JSON read within bounds: the one parser of JSON that a user, another run or another process
could have written (manifests, error reports, leases, a model folder's model.json, options given
as JSON). tests/test_bounded_parsers.py fails on any other `json.load`, `json.loads` or decoder.

`json.loads` has no bounds of its own: its work and memory grow with the text it is given, and it
recurses once a level of nesting, so `[[[[...` a few thousand deep ends in RecursionError, and
values nested a few hundred deep end whatever reads them recursively after it (a comparison, a
repr, a check against a schema). Here each caller bounds the text's length, the nesting is
counted before parsing, without recursion, and what Python's json module reads beyond JSON is
refused: NaN and Infinity (which JSON lacks, and every check of a range passes), and integers of
more digits than Python converts. Each refusal is NotJson, one line that quotes nothing of the
text (it may be any file). Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any, TextIO

# Levels of arrays and objects inside one another. What this package writes nests 5 (a manifest's
# options.image.keys.<role>); the rest is room for readers of other JSON (model.json, options).
MAX_DEPTH = 32

_ESCAPES = re.compile(rb"\\.", re.DOTALL)  # \" and \\ inside strings, which neither open nor close one
_BUT_BRACKETS_AND_QUOTES = bytes(b for b in range(256) if b not in b'[]{}"')
_STRINGS = re.compile(rb'"[^"]*"')
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class NotJson(ValueError):
    """Text that is not JSON, or longer or deeper than its reader takes: one line that says why and
    quotes nothing of the text; the caller puts the file in front of it."""


def loads(text: str | bytes, max_chars: int) -> Any:
    """The JSON value of `text` (bytes: UTF-8), at most `max_chars` characters (the caller's bound
    on what it reads), nested at most MAX_DEPTH deep; else NotJson."""
    if len(text) > max_chars:
        unit = "bytes" if isinstance(text, bytes) else "characters"
        raise NotJson(f"is longer than {max_chars:,} {unit}, the most it may be")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise NotJson(f"is not UTF-8 text: byte 0x{text[e.start]:02x} at offset {e.start}") from e
    depth = nesting(text)
    if depth > MAX_DEPTH:
        raise NotJson(f"nests arrays or objects {depth} levels deep, more than the {MAX_DEPTH} it may")
    try:
        return json.loads(text, parse_constant=_not_json_constant)
    except NotJson:
        raise
    except json.JSONDecodeError as e:  # its message says where, and quotes nothing
        raise NotJson(f"is not JSON: {e}") from e
    except ValueError as e:  # an integer of more than 4,300 digits
        raise NotJson(f"is not JSON this reader takes: {e}") from e


def nesting(text: str) -> int:
    """How deep the arrays and objects of JSON `text` nest, counted from its brackets outside
    strings, in time linear in the text and without recursion (a text that is not JSON gets a
    count too; json.loads then refuses it). Bytes at a time, at a tenth of what parsing costs:
    escapes go, then all but brackets and quotes (UTF-8 writes no other character with their
    bytes), then the strings, whose quotes now pair up with only brackets between them."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = _ESCAPES.sub(b"", data)
    kept = data.translate(None, _BUT_BRACKETS_AND_QUOTES).replace(b'""', b"")
    if b'"' in kept:  # the quote of a string left open stays: the text is not JSON
        kept = _STRINGS.sub(b"", kept).replace(b'"', b"")
    return max(accumulate(map(_STEP.__getitem__, kept)), default=0)


def _not_json_constant(name: str):
    raise NotJson(f"is not JSON: it holds {name}, which JSON has no value for")


def json_lines(text: TextIO, max_chars: int) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line of a JSON Lines stream, the value NotJson for a
    line that is not JSON or longer than `max_chars` (never read whole: the rest of such a line
    is skipped, a bounded piece at a time)."""
    number = 0
    while True:
        line = text.readline(max_chars + 1)
        if not line:
            return
        number += 1
        if len(line) > max_chars and not line.endswith("\n"):
            while line and not line.endswith("\n"):
                line = text.readline(max_chars + 1)
            yield number, NotJson(f"is longer than {max_chars:,} characters, the most a line may be")
            continue
        if not line.strip():
            continue
        try:
            yield number, loads(line, max_chars)
        except NotJson as e:
            yield number, e
