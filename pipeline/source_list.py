"""A refresh version's sources file (core.contract.layout.SOURCES_NAME): every entry the planner
listed, as its fingerprint hashed it (pipeline.listing_digest: path, size, modification or
generation time; size -1 for one that could not be listed), a JSON object a line, GZIP, sorted
by path. Sorted, two versions' files diff in one streaming merge (`compare`), so that the report
of a version says which sources were added, removed or changed since the previous one however
many there are.

The listing comes in any order (gs:// prefixes are listed side by side) and may hold millions of
entries: `SourceList` sorts it in runs of RUN_ENTRIES, each kept in an anonymous temporary file,
and merges them as it writes, so memory holds one run. The file is checked before the version
is published (`sources_problems`): it parses, is sorted, and hashes to the listing's fingerprint.
"""

from __future__ import annotations

import dataclasses
import gzip
import heapq
import io
import json
import tempfile
from collections.abc import Iterator
from typing import NamedTuple

from apache_beam.io.filesystem import CompressionTypes

from core import storage
from core.contract.json_text import NotJson, json_lines
from core.contract.manifest import Listing
from pipeline.listing_digest import UNLISTED_SIZE, ListingDigest

RUN_ENTRIES = 100_000  # entries sorted in memory at a time
LINE_CHARS = 16_384  # the longest line read: a path of 4,096 bytes, each escaped, with its numbers


class SourceEntry(NamedTuple):
    path: str
    size: int
    mtime: float


class SourcesError(ValueError):
    """A sources file that does not read as one: the line and why."""


class SourceList:
    """Collects the entries of a listing (ListingDigest's sink) and writes them sorted by path."""

    def __init__(self, run_entries: int = RUN_ENTRIES) -> None:
        self.run_entries = run_entries
        self._entries: list[SourceEntry] = []
        self._runs: list[io.TextIOWrapper] = []

    def add(self, path: str, size: int, mtime: float) -> None:
        self._entries.append(SourceEntry(path, size, mtime))
        if len(self._entries) >= self.run_entries:
            self._spill()

    def _spill(self) -> None:
        run = io.TextIOWrapper(tempfile.TemporaryFile(), encoding="utf-8")  # anonymous: gone once closed
        run.writelines(_line(entry) for entry in sorted(self._entries))
        run.seek(0)
        self._runs.append(run)
        self._entries = []

    def write(self, path: str) -> None:
        """Writes the sorted entries to `path` (local or gs://), a GZIP file."""
        self._entries.sort()
        runs = [_read_lines(run, "a run of the listing") for run in self._runs]
        with storage.create(path, CompressionTypes.GZIP, mime_type="application/x-ndjson") as out:
            for entry in heapq.merge(iter(self._entries), *runs):
                out.write(_line(entry).encode("utf-8"))
        self.close()

    def close(self) -> None:
        for run in self._runs:
            run.close()
        self._runs, self._entries = [], []

    def __enter__(self) -> SourceList:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _line(entry: SourceEntry) -> str:
    return json.dumps({"path": entry.path, "size": entry.size, "mtime": entry.mtime}) + "\n"


def _read_lines(text, name: str) -> Iterator[SourceEntry]:
    for number, value in json_lines(text, LINE_CHARS):
        if isinstance(value, NotJson):
            raise SourcesError(f"{name}, line {number}: {value}")
        try:
            entry = SourceEntry(value["path"], value["size"], value["mtime"])
        except (TypeError, KeyError) as e:
            raise SourcesError(f"{name}, line {number}: not an object with path, size and mtime") from e
        if not (isinstance(entry.path, str) and isinstance(entry.size, int) and isinstance(entry.mtime, int | float)):
            raise SourcesError(f"{name}, line {number}: path must be text, size an integer, mtime a number")
        yield entry


def read_sources(path: str, *, inside: str) -> Iterator[SourceEntry]:
    """The entries of the sources file at `path`, in the file's order, read as they are needed;
    SourcesError (naming the line) where one does not parse."""
    with storage.open_binary(path, inside=inside) as raw, gzip.GzipFile(fileobj=raw) as unzipped:
        yield from _read_lines(io.TextIOWrapper(unzipped, encoding="utf-8"), path)


def sources_problems(path: str, folder: str, listing: Listing) -> list[str]:
    """Why the sources file at `path` (in the version `folder`) cannot be trusted: it does not
    read, is not sorted by path, or is not the listing its fingerprint was made of (empty when it
    can)."""
    digest, last = ListingDigest(), None
    try:
        for entry in read_sources(path, inside=folder):
            if last is not None and entry < last:
                return [f"{path}: not sorted by path ({entry.path!r} after {last.path!r})"]
            if entry.size == UNLISTED_SIZE:
                digest.add_unlisted(entry.path)
            else:
                digest.add(entry.path, entry.size, entry.mtime)
            last = entry
    except (SourcesError, OSError, EOFError) as e:
        return [f"the sources file cannot be read: {e}"]
    if digest.fingerprint != listing.fingerprint or digest.files != listing.files:
        return [
            f"{path}: its {digest.files:,} entries are not the {listing.files:,} the run listed (fingerprint "
            f"{digest.fingerprint[:20]}, not {listing.fingerprint[:20]})"
        ]
    return []


@dataclasses.dataclass
class SourceChanges:
    """Sources added, removed and changed (in size or time) between two versions, with the first
    `examples` paths of each (in path order)."""

    examples: int
    added: int = 0
    removed: int = 0
    changed: int = 0
    unchanged: int = 0
    first_added: list[str] = dataclasses.field(default_factory=list)
    first_removed: list[str] = dataclasses.field(default_factory=list)
    first_changed: list[str] = dataclasses.field(default_factory=list)

    def count(self, kind: str, path: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        shown = getattr(self, "first_" + kind)
        if len(shown) < self.examples:
            shown.append(path)


def compare(before: Iterator[SourceEntry], after: Iterator[SourceEntry], examples: int) -> SourceChanges:
    """What changed from `before` to `after`, both sorted by path, in one pass over each."""
    changes = SourceChanges(examples)
    a, b = next(before, None), next(after, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a.path < b.path):
            changes.count("removed", a.path)
            a = next(before, None)
        elif a is None or b.path < a.path:
            changes.count("added", b.path)
            b = next(after, None)
        else:
            if (a.size, a.mtime) != (b.size, b.mtime):
                changes.count("changed", b.path)
            else:
                changes.unchanged += 1
            a, b = next(before, None), next(after, None)
    return changes
