"""Deterministic split assignment.

A source's split is a function of its key alone (its path relative to the input root, or its URI
as written in a CSV), so reruns and later refreshes put every source in the same split, and moving
a dataset to another bucket does not reshuffle train and validation.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Sequence

_SPLIT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# What people call the three usual splits (in any case: folder names, AutoML's TRAIN/VALIDATION/
# TEST), as TFDS and Hugging Face read them, and the split each is.
SPLIT_NAMES = {
    "train": "train",
    "training": "train",
    "val": "validation",
    "valid": "validation",
    "validation": "validation",
    "dev": "validation",
    "test": "test",
    "testing": "test",
}
READER_SPLITS = ("train", "validation", "test")  # the splits readers and the trainer look for by default


def check_split_name(name: str) -> str:
    """Split names become file-name prefixes, so they are restricted to [a-z][a-z0-9_]*."""
    if not _SPLIT_NAME.match(name):
        raise ValueError(f"split name {name!r} must match [a-z][a-z0-9_]*")
    return name


def misspelt(names: Sequence[str]) -> dict[str, str]:
    """{name: the split it is likely a typo of} for each of `names` that is not one of
    READER_SPLITS but close to one the others do not name (`valdation`, `trian`): readers and the
    trainer look for those by name (`validation-*`), and find nothing under a misspelt one."""
    typos = {}
    for name in names:
        close = [meant for meant in READER_SPLITS if meant not in names and meant != name]
        match = difflib.get_close_matches(name, close, n=1, cutoff=0.8)
        if match and name not in READER_SPLITS:
            typos[name] = match[0]
    return typos


def hash_fraction(key: str) -> float:
    """A uniform number in [0, 1) fixed by the key (first 64 bits of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2.0**64


def assign_split(key: str, fractions: Sequence[tuple[str, float]]) -> str:
    """The split whose cumulative fraction interval holds hash_fraction(key).

    `fractions` is an ordered sequence of (name, fraction) summing to 1; the order is part of the
    contract (config order), so adding a split at the end moves as few sources as possible.
    """
    return SplitAssigner(fractions)(key)


class SplitAssigner:
    """assign_split for one `fractions`, with the cumulative bounds summed once: a listing assigns
    millions of keys the same way."""

    def __init__(self, fractions: Sequence[tuple[str, float]]) -> None:
        bounds, cumulative = [], 0.0
        for name, fraction in fractions:
            cumulative += fraction
            bounds.append((cumulative, name))
        self._bounds = tuple(bounds)
        self._last = fractions[-1][0]

    def __call__(self, key: str) -> str:
        point = hash_fraction(key)
        for bound, name in self._bounds:
            if point < bound:
                return name
        return self._last
