"""Which of the two layouts of labelled image folders an input is in, decided once from the names of
the folders directly below it.

- Class folders, `SRC/<label>/**/image`: every image's split is a hash of its path (transforms.splits).
- Split folders, `SRC/<split>/<label>/**/image`: the layout TFDS `ImageFolder` and Hugging Face's
  `imagefolder` read, and most downloaded datasets come in. The split is the folder's, the label the
  folder below it.

Read as class folders, split folders become classes named `train` and `val`, and a model learns to
tell the splits apart, with nothing failing. So the folder names decide (`auto`): folders that are
all split names are split folders, folders none of which is one are class folders, and a mix of the
two is refused, as are two folders naming one split, because either reading could be the wrong one.
`image.layout` names the layout instead, for class folders that happen to be named as splits (a
class `test`). No Beam: the planner decides, and the plan carries the decision to every worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from transforms.splits import SPLIT_NAMES

AUTO = "auto"
CLASS_FOLDERS = "class_folders"
SPLIT_FOLDERS = "split_folders"
LAYOUTS = (AUTO, CLASS_FOLDERS, SPLIT_FOLDERS)
LAYOUT_FLAG = "--layout"  # the flag that sets image.layout, which refusals name as the fix

_SPLIT_ORDER = ("train", "validation", "test")
_SHOWN = 5  # folder names a refusal lists


class LayoutError(ValueError):
    """Folders whose layout cannot be decided: one line naming them and the setting that decides."""


@dataclasses.dataclass(frozen=True)
class FolderLayout:
    """How the folders below an input are read: `split_folders` maps each split folder's name to
    its split; empty for class folders."""

    split_folders: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, split_folders: dict[str, str]) -> FolderLayout:
        """Split folders {folder: split}, in the order train, validation, test (as a manifest's
        sorted keys do not keep them)."""
        return cls(tuple(sorted(split_folders.items(), key=lambda item: (_SPLIT_ORDER.index(item[1]), item[0]))))

    @property
    def name(self) -> str:
        return SPLIT_FOLDERS if self.split_folders else CLASS_FOLDERS

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits of split folders, in the order train, validation, test."""
        found = {split for _, split in self.split_folders}
        return tuple(split for split in _SPLIT_ORDER if split in found)

    def split_of(self, folder: str) -> str | None:
        """The split a folder directly below the input holds (None: not a split folder)."""
        return dict(self.split_folders).get(folder)

    def described(self) -> dict:
        """For the manifest's inputs: the layout, and which folder holds which split."""
        return {"folders": self.name, **({"split_folders": dict(self.split_folders)} if self.split_folders else {})}


CLASS_FOLDER_LAYOUT = FolderLayout()


def detect_layout(folders: Iterable[str], setting: str = AUTO) -> FolderLayout:
    """The layout of an input whose folders directly below it are named `folders` (hidden ones,
    starting with ".", are not data and do not count), as `setting` (image.layout) names it or,
    for `auto`, as the names show. LayoutError for a mix of split and class folders, for two
    folders naming one split, and for split_folders where a folder names no split."""
    visible = sorted(name for name in folders if not name.startswith("."))
    if setting == CLASS_FOLDERS:
        return CLASS_FOLDER_LAYOUT
    named = {name: SPLIT_NAMES[name.lower()] for name in visible if name.lower() in SPLIT_NAMES}
    others = [name for name in visible if name not in named]
    if setting == SPLIT_FOLDERS and (others or not named):
        found = f"{_listed(others)} {'is' if len(others) == 1 else 'are'} not" if others else "no folder is"
        raise LayoutError(
            f"image.layout {SPLIT_FOLDERS}, but {found} named as a split ({_split_names()}): name the split folders "
            f"so, or set {LAYOUT_FLAG} {AUTO}"
        )
    if not named:
        return CLASS_FOLDER_LAYOUT
    if others:
        raise LayoutError(
            f"its folders mix split folders ({_listed(named)}) with other folders ({_listed(others)}): put the "
            f"class folders inside the split folders (<split>/<label>/...), or read every folder as a class with "
            f"{LAYOUT_FLAG} {CLASS_FOLDERS}"
        )
    by_split: dict[str, list[str]] = {}
    for name, split in named.items():
        by_split.setdefault(split, []).append(name)
    twice = next((names for names in by_split.values() if len(names) > 1), None)
    if twice:
        raise LayoutError(
            f"folders {_listed(twice)} all name split {named[twice[0]]!r}: merge them into one folder, or read "
            f"every folder as a class with {LAYOUT_FLAG} {CLASS_FOLDERS}"
        )
    return FolderLayout.of(named)


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(f"{name if name.isprintable() else ascii(name)}/" for name in names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _split_names() -> str:
    by_split: dict[str, list[str]] = {}
    for name, split in SPLIT_NAMES.items():
        by_split.setdefault(split, []).append(name)
    return "; ".join("/".join(names) for names in by_split.values())
