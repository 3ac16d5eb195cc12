"""What proves that a path is the product's to delete: the evidence every delete carries to
core.storage.delete, the one function that deletes anything a user can see, which refuses the
whole delete (Unproven) when the evidence does not cover one of its paths.

A name's shape is never evidence: a user's `classes.labels.txt`, `train-00000-of-00001.tfrecord.gz`
or `manifest.json.tmp` look like a run's files. A path goes only when

- `OwnFolder`: this run made its folder new (its staging folder, a refresh's version folder, its
  shard parts: made exclusively, so a folder or link already under that name stopped the run),
  and the path is that folder or below it;
- `NamedBy`: a manifest of the folder names it (a committed or rejected one, or one a run keeps in
  its staging folder while it moves its files in or replaces others, whose copies are proven the
  same files as the staged ones: pipeline.folder_store); a
  folder of such names goes only when they emptied it;
- `RunFolders`: it is a folder directly below a dataset folder or a refresh root, under a name
  only runs make (`.staging-<run>`, a version's UTC timestamp) that the caller proved a run's (a
  run name nothing else makes; a version its manifest or its name to the microsecond makes one),
  or below one;
- `MadeFolders`: it is a folder this run made to hold a file it wrote (its lease), when empty.

Standard library only: the evidence is judged where the delete is made, in any process.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Protocol

from core.contract.layout import STAGING_PREFIX, is_contained
from core.contract.versions import is_run, is_version


class Unproven(ValueError):
    """A delete whose evidence does not cover one of its paths: nothing of it was deleted."""


class Evidence(Protocol):
    whole: ClassVar[bool]  # a folder it covers goes with everything below it; else only when empty
    root: str | None  # the folder it speaks of: nothing is deleted through a link below it

    def covers(self, path: str) -> bool:
        """Whether the evidence makes `path` the product's to delete."""

    def is_folder(self, path: str) -> bool:
        """Whether `path`, which it covers, is a folder by this evidence (on gs://, a prefix: its
        objects go when `whole`, and nothing otherwise, gs:// having no folders)."""


def below(path: str, folder: str) -> str | None:
    """`path` relative to `folder` ("" for the folder itself); None when it is not in it, or names
    a place elsewhere (`folder/../x`, `folder/./x`, `folder//x`)."""
    folder, path = folder.rstrip("/"), path.rstrip("/")
    if path == folder:
        return ""
    if not path.startswith(folder + "/"):
        return None
    relative = path[len(folder) + 1 :]
    return relative if all(part not in ("", ".", "..") for part in relative.split("/")) else None


def is_run_folder(name: str) -> bool:
    """Whether a folder's name is one only runs make: `.staging-<run>` (a run's name is a UTC time to
    the microsecond and 8 random hex digits) or a version's."""
    return (name.startswith(STAGING_PREFIX) and is_run(name[len(STAGING_PREFIX) :])) or is_version(name)


@dataclasses.dataclass(frozen=True)
class OwnFolder:
    """The folder this run made new, and everything below it."""

    folder: str
    whole: ClassVar[bool] = True

    @property
    def root(self) -> str:
        return self.folder

    def covers(self, path: str) -> bool:
        return below(path, self.folder) is not None

    def is_folder(self, path: str) -> bool:
        return below(path, self.folder) == ""

    def __str__(self) -> str:
        return f"in this run's own folder {self.folder}"


@dataclasses.dataclass(frozen=True)
class NamedBy:
    """The files (relative to `folder`) that the manifest at `manifest` names, and the folders
    holding them once they are empty."""

    folder: str
    names: frozenset[str]
    manifest: str
    whole: ClassVar[bool] = False

    @property
    def root(self) -> str:
        return self.folder

    def covers(self, path: str) -> bool:
        name = below(path, self.folder)
        if not name or not is_contained(name):
            return False
        return name in self.names or any(named.startswith(name + "/") for named in self.names)

    def is_folder(self, path: str) -> bool:
        return below(path, self.folder) not in self.names

    def __str__(self) -> str:
        return f"named by {self.manifest}"


@dataclasses.dataclass(frozen=True)
class RunFolders:
    """The folders `names` directly in `parent`, each under a name only runs make (is_run_folder),
    and everything below them: what a run that did not finish left, as the caller proved it."""

    parent: str
    names: frozenset[str]
    whole: ClassVar[bool] = True

    @property
    def root(self) -> str:
        return self.parent

    def covers(self, path: str) -> bool:
        name = below(path, self.parent)
        top = (name or "").split("/")[0]
        return top in self.names and is_run_folder(top)

    def is_folder(self, path: str) -> bool:
        return below(path, self.parent) in self.names

    def __str__(self) -> str:
        return f"a folder runs of this pipeline make in {self.parent}"


@dataclasses.dataclass(frozen=True)
class MadeFolders:
    """Folders this run made to hold a file it wrote, removed only when empty."""

    folders: tuple[str, ...]
    whole: ClassVar[bool] = False

    root = None  # folders this run made: an empty one is removed (rmdir follows no link)

    def covers(self, path: str) -> bool:
        return path in self.folders

    def is_folder(self, path: str) -> bool:
        return True

    def __str__(self) -> str:
        return "a folder this run made"
