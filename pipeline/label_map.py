"""A run's label map: what it may hide (how a new version of a dataset keeps its ids:
transforms.label_column.kept_ids).

Labels that a person reads as one but that are distinct strings each become a class of their own
and split the examples of what is meant as one.
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


def _shown(labels: list[str] | tuple[str, ...]) -> str:
    """Up to 10 labels, printed with ascii() so that look-alike spellings differ on the page."""
    return ", ".join(map(ascii, labels[:10])) + (" and more" if len(labels) > 10 else "")


def missing_from_split_warnings(records: dict[str, dict[str, int]]) -> list[str]:
    """A warning per split that holds records but none of some labels other splits hold
    (`records`: split -> label -> records): a class with few sources can hash into one split alone,
    and then training never sees it, or evaluation never measures it."""
    held = {label for counts in records.values() for label, n in counts.items() if n}
    found = []
    for split, counts in sorted(records.items()):
        missing = sorted(label for label in held if not counts.get(label))
        if missing and any(counts.values()):
            found.append(
                f"{len(missing)} label(s) have records, but none in split {split!r}: {_shown(missing)} (the split "
                f"hash put all their sources elsewhere: {split!r} cannot teach or measure them)"
            )
    return found


def new_labels_warnings(labels: tuple[str, ...], kept: int) -> list[str]:
    """A warning naming the labels a refresh added after the `kept` ids of its previous version: a
    model trained on that version has no output for them, and a scheduled refresh has nobody
    reading its log."""
    new = labels[kept:] if kept else ()
    if not new:
        return []
    return [
        f"{len(new)} label(s) are new since the previous version, after its {kept} label(s): {_shown(new)}; "
        "a model trained on that version has no output for them"
    ]


def empty_labels_warnings(labels: tuple[str, ...], records: dict[str, dict[str, int]]) -> list[str]:
    """A warning naming the labels of the map that no record holds (`records`: split -> label ->
    records): every source of the class failed, or, in a refresh, it has none left and keeps its id."""
    empty = [label for label in labels if not any(split.get(label) for split in records.values())]
    if not empty:
        return []
    return [
        f"{len(empty)} label(s) of the label map have no records: {_shown(empty)} (every source failed, or, "
        "in a refresh, none is left and the class keeps its id); a model still has an output for each"
    ]


def one_class_warnings(labels: tuple[str, ...]) -> list[str]:
    """A warning when the label map has one class: nothing for a classifier to tell apart (a
    folder of one class given as the input, or a label column of one value)."""
    if len(labels) != 1:
        return []
    return [f"the dataset has one class, {_shown(labels)}: a classifier needs two or more to tell apart"]
