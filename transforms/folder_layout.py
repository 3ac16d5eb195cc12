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
from collections.abc import Callable, Iterable

from transforms.splits import READER_SPLITS, SPLIT_NAMES

AUTO = "auto"
CLASS_FOLDERS = "class_folders"
SPLIT_FOLDERS = "split_folders"
LAYOUTS = (AUTO, CLASS_FOLDERS, SPLIT_FOLDERS)
LAYOUT_FLAG = "--layout"  # the flag that sets image.layout, which refusals name as the fix

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
        return cls(tuple(sorted(split_folders.items(), key=lambda item: (READER_SPLITS.index(item[1]), item[0]))))

    @property
    def name(self) -> str:
        return SPLIT_FOLDERS if self.split_folders else CLASS_FOLDERS

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits of split folders, in the order train, validation, test."""
        found = {split for _, split in self.split_folders}
        return tuple(split for split in READER_SPLITS if split in found)

    def split_of(self, folder: str) -> str | None:
        """The split a folder directly below the input holds (None: not a split folder)."""
        return dict(self.split_folders).get(folder)

    def described(self) -> dict:
        """For the manifest's inputs: the layout, and which folder holds which split."""
        return {"folders": self.name, **({"split_folders": dict(self.split_folders)} if self.split_folders else {})}


CLASS_FOLDER_LAYOUT = FolderLayout()


def detect_layout(
    folders: Iterable[str],
    setting: str = AUTO,
    folders_below: Callable[[str], Iterable[str]] | None = None,
    root: str = "SRC",
) -> FolderLayout:
    """The layout of an input whose folders directly below it are named `folders` (hidden ones,
    starting with ".", are not data and do not count), as `setting` (image.layout) names it or,
    for `auto`, as the names show. LayoutError for a mix of split and class folders, for two
    folders naming one split, and for split_folders where a folder names no split; and for `auto`,
    where the input's one folder holds split folders or class folders itself (the dataset is one
    level down, as an archive unpacks into a folder of its own), seen by `folders_below` (the
    names of the folders below one of them; `root`: the input, as refusals name it)."""
    visible = sorted(name for name in folders if not name.startswith("."))
    if setting == CLASS_FOLDERS:
        return CLASS_FOLDER_LAYOUT
    if setting == AUTO and len(visible) == 1 and visible[0].lower() not in SPLIT_NAMES and folders_below:
        below = [name for name in folders_below(visible[0]) if not name.startswith(".")]
        _one_level_down(f"{root.rstrip('/')}/{visible[0]}", visible[0], below)
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


def _one_level_down(path: str, folder: str, below: list[str]) -> None:
    """LayoutError where the one folder of an input (at `path`) holds the dataset's split folders,
    or two or more class folders: read as class folders, it would be a dataset of one class."""
    shown = _listed([folder])
    if below and all(name.lower() in SPLIT_NAMES for name in below):
        raise LayoutError(
            f"its one folder {shown} holds split folders ({_listed(below)}): give --input {path}, or read {shown} as "
            f"the one class with {LAYOUT_FLAG} {CLASS_FOLDERS}"
        )
    if len(below) > 1 and not any(name.lower() in SPLIT_NAMES for name in below):
        raise LayoutError(
            f"its one folder {shown} holds folders ({_listed(below)}), which would all be one class: give --input "
            f"{path} to read them as classes, or read {shown} as the one class with {LAYOUT_FLAG} {CLASS_FOLDERS}"
        )


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(f"{name if name.isprintable() else ascii(name)}/" for name in names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _split_names() -> str:
    by_split: dict[str, list[str]] = {}
    for name, split in SPLIT_NAMES.items():
        by_split.setdefault(split, []).append(name)
    return "; ".join("/".join(names) for names in by_split.values())
