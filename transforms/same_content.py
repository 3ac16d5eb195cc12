"""Sources that hold the same bytes: one image stored under several names.

Each copy stays a record, as listed, and the run names them, because they are silently wrong in a
way no single file is: a copy in another split puts a training image into evaluation, whose
metrics then overstate; a copy under another label asks the model for two answers to one image; a
copy in the same split and label counts twice. Only byte-identical copies are found (a 128-bit
XXH3 of each source, what `xxhsum -H2` prints: a twentieth of SHA-256's cost, and no one gains by
forging a collision here); a re-saved or resized copy is another image.

No Beam here: the digest is taken where each source is read (transforms.image_convert), the groups
are reduced into the run's OutcomeSummary (transforms.outcomes), and each is a line of the run's
copies report (transforms.write).
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import xxhash

CONTENT = "content"  # tag of ReadImages' output: per bundle, a list of each record's (digest, Copy)

# What a group of copies is found to be: IN_SPLITS and/or UNDER_LABELS where its copies differ in
# that field, else REPEATED.
IN_SPLITS, UNDER_LABELS, REPEATED = "splits", "labels", "repeated"
DIFFERING = {IN_SPLITS: "split", UNDER_LABELS: "label", REPEATED: None}


def content_digest(data: bytes) -> bytes:
    return xxhash.xxh3_128_digest(data)


class Copy(NamedTuple):
    source: str
    split: str
    label: str


class SameContent(NamedTuple):
    """Two or more sources with one digest, `copies` sorted by source."""

    digest: bytes
    copies: tuple[Copy, ...]

    def to_json(self) -> str:
        """One line of the run's copies report (core.contract.layout)."""
        copies = [c._asdict() for c in self.copies]
        return json.dumps({"xxh128": self.digest.hex(), "copies": copies}, ensure_ascii=False, sort_keys=True)

    def kinds(self) -> tuple[str, ...]:
        kinds = tuple(
            kind for kind in (IN_SPLITS, UNDER_LABELS) if len({getattr(c, DIFFERING[kind]) for c in self.copies}) > 1
        )
        return kinds or (REPEATED,)


def same_content(digest: bytes, copies) -> list[SameContent]:
    """The group of the copies of one digest when there is more than one (a GroupByKey's output)."""
    copies = sorted(copies)
    return [SameContent(digest, tuple(copies))] if len(copies) > 1 else []


def groups_in(batches: Iterable[list[tuple[bytes, Copy]]]) -> Iterator[SameContent]:
    """Every group in the batches, gathered in this process (a local run's, which holds them all anyway)."""
    by_digest = collections.defaultdict(list)
    for batch in batches:
        for digest, copy in batch:
            by_digest[digest].append(copy)
    for digest, copies in by_digest.items():
        yield from same_content(digest, copies)


@dataclasses.dataclass
class SameContentSummary:
    """Per kind of group: how many groups and sources, and the group whose first source sorts first
    (the same example whichever runner or order found them)."""

    groups: dict[str, int] = dataclasses.field(default_factory=dict)
    sources: dict[str, int] = dataclasses.field(default_factory=dict)
    examples: dict[str, SameContent] = dataclasses.field(default_factory=dict)

    def add(self, group: SameContent) -> None:
        for kind in group.kinds():
            self._add(kind, 1, len(group.copies), group)

    def merge(self, other: SameContentSummary) -> None:
        for kind, n in other.groups.items():
            self._add(kind, n, other.sources[kind], other.examples[kind])

    def _add(self, kind: str, groups: int, sources: int, example: SameContent) -> None:
        self.groups[kind] = self.groups.get(kind, 0) + groups
        self.sources[kind] = self.sources.get(kind, 0) + sources
        if kind not in self.examples or example.copies < self.examples[kind].copies:
            self.examples[kind] = example

    def warnings(self) -> list[str]:
        found = []
        for kind, what in (
            (IN_SPLITS, "in more than one split: evaluation sees training images, and its metrics overstate"),
            (UNDER_LABELS, "under more than one label"),
            (REPEATED, "more than once in one split under one label: each copy counts as another image"),
        ):
            if kind not in self.groups:
                continue
            example, differ = self.examples[kind], DIFFERING[kind]
            first = example.copies[0]
            other = next(c for c in example.copies[1:] if not differ or getattr(c, differ) != getattr(first, differ))
            found.append(
                f"{self.groups[kind]:,} image(s) are stored {what} ({self.sources[kind]:,} sources in all; for example "
                f"{_named(first, differ)} and {_named(other, differ)}, xxh128 {example.digest.hex()})"
            )
        return found


def _named(copy: Copy, differ: str | None) -> str:
    return f"{copy.source} ({differ} {getattr(copy, differ)!r})" if differ else copy.source
