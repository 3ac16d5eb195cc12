"""The fingerprint of a listing, and its totals, accumulated as the listing streams.

A refresh skips a run when its input is unchanged, which it tells by the fingerprint of what the
planner listed: every entry's path, size and modification time (or generation time). Holding and
sorting millions of entries to hash them in order does not fit a launcher, so each entry is hashed
on its own and the digests are added modulo 2**256: the sum does not depend on the order the
listing comes in (gs:// prefixes are listed side by side), and any entry added, removed or changed
changes it. It detects change, it is not a signature: whoever could plant input on purpose to
collide could change the input anyway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

METHOD = "set-sha256"  # how the fingerprint is made: its prefix, so that a refresh can tell the method changed
_MODULUS = 1 << 256
UNLISTED_SIZE = -1  # the size an entry that could not be listed is hashed with


class ListingDigest:
    """Files, bytes and the order-independent fingerprint of a listing. An entry that could not
    be listed (a dangling link, an unreadable folder: `add_unlisted`) counts as a file of size
    -1, so that input which gained or lost one has changed. `sink`, when given, is handed each
    entry as it is hashed (a refresh's pipeline.source_list.SourceList)."""

    def __init__(self, sink: Callable[[str, int, float], None] | None = None) -> None:
        self.sink = sink
        self.files = 0
        self.bytes = 0
        self.unlisted = 0
        self._sum = 0

    def add(self, path: str, size: int, mtime: float) -> None:
        self.files += 1
        self.bytes += size
        self._sum += _entry_digest(path, size, mtime)  # reduced once, in `fingerprint`
        if self.sink is not None:
            self.sink(path, size, mtime)

    def add_unlisted(self, path: str) -> None:
        self.unlisted += 1
        self._sum += _entry_digest(path, UNLISTED_SIZE, 0)
        if self.sink is not None:
            self.sink(path, UNLISTED_SIZE, 0)

    @property
    def fingerprint(self) -> str:
        return f"{METHOD}:{self._sum % _MODULUS:064x}"


def _entry_digest(path: str, size: int, mtime: float) -> int:
    """SHA-256 of the entry's line `path<TAB>size<TAB>mtime<LF>`, numbers as str() writes them."""
    line = path + "\t" + str(size) + "\t" + str(mtime) + "\n"  # what f"{size}" writes, without format()'s cost
    return int.from_bytes(hashlib.sha256(line.encode("utf-8", "surrogateescape")).digest(), "big")


def same_method(fingerprint: str) -> bool:
    """Whether `fingerprint` was made as ListingDigest makes one (a version published before it
    holds the SHA-256 of the sorted listing, which no listing compares equal to)."""
    return fingerprint.startswith(METHOD + ":")
