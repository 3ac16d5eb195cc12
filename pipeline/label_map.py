"""What a run's label map may hide: labels that a person reads as one but that are distinct
strings, so each becomes a class of its own and splits the examples of what is meant as one.

Folders copied from macOS name `café` in decomposed Unicode (NFD), most other tools in composed
form (NFC); hand-written CSVs mix `Cat` and `cat`, or keep a full-width or trailing space. The run
keeps them apart, as the data says, and its manifest warns, naming them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable


def alike(label: str) -> str:
    """What a person reads in `label`: compatibility-normalised (NFKC), case-folded, unpadded."""
    return unicodedata.normalize("NFKC", label).casefold().strip()


def alike_labels_warnings(labels: Iterable[str]) -> list[str]:
    """A warning per group of labels that differ only in case, Unicode form or surrounding space."""
    groups: dict[str, list[str]] = {}
    for label in sorted(labels):
        groups.setdefault(alike(label), []).append(label)
    return [
        f"labels {', '.join(map(ascii, group))} differ only in case, Unicode form or spaces: each is a class of "
        "its own; rename the folders or CSV labels to one spelling to merge them"
        for group in groups.values()
        if len(group) > 1
    ]
