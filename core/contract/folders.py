"""What a folder is to this product, decided in one place (`folder_kind`): a dataset folder (a
`manifest.json` or a rejected run's `manifest.rejected.json` at its top), a refresh ROOT (`LATEST`,
or version folders named as only a refresh names them, to the microsecond), neither (a new or
empty folder, or one of other files), or a mix of the two, which no command writes into and no
reader reads. `convert` refuses a ROOT and `refresh` a dataset folder, `inspect` and the trainer
read the dataset a folder holds (`dataset_folder`: a ROOT's is the version LATEST names), and a
run's last line says what its output holds, all through it; tests/test_folder_kinds.py fails when
other code reads LATEST or looks for a manifest by its name.

No I/O of its own: the caller passes `read_text(path)`, which returns a file's text, and either
returns None or raises a "not found" error (FileNotFoundError, tf.errors.NotFoundError,
google.api_core NotFound, ...) for a file that does not exist (any other error is passed on, so an
unreadable LATEST is never taken for none), and `list_names(folder)`, the names directly in a
folder ([] for one that does not exist; a trailing "/" on a folder's name is ignored).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from core.contract.layout import MANIFEST_NAME, REJECTED_MANIFEST_NAME, join
from core.contract.versions import LATEST_NAME, is_run_version, is_version, named_like_a_version, parse_pointer

DATASET, ROOT, NEITHER = "a dataset folder", "a refresh root", "neither a dataset folder nor a refresh root"
MIX = "both a dataset folder and a refresh root"
VERSION_EXAMPLE = "20250301T020000123456Z"  # a version's name, as messages show one


class FolderKindError(ValueError):
    """A folder a reader was given holds no dataset to read (a ROOT before its first version), or
    two that it cannot tell apart (a mix)."""


@dataclasses.dataclass(frozen=True)
class FolderKind:
    """What `path` is, and the names that say so."""

    path: str
    kind: str  # DATASET, ROOT, NEITHER or MIX
    manifests: tuple[str, ...]  # manifest.json and manifest.rejected.json, those at its top
    latest: str | None  # the version LATEST names, when there is a LATEST
    versions: tuple[str, ...]  # the version folders at its top
    not_versions: tuple[str, ...]  # names of a version's shape that are no time (`20250230T000000Z`)

    @property
    def committed(self) -> bool:
        """Whether it holds a committed dataset's manifest (manifest.json), not only a rejected one."""
        return MANIFEST_NAME in self.manifests

    def not_versions_line(self) -> str | None:
        """The one line that names the names of a version's shape that are no time (None when
        there are none): they are no version, so no refresh reads, publishes or deletes them."""
        if not self.not_versions:
            return None
        more = f" and {len(self.not_versions) - 1} more" if len(self.not_versions) > 1 else ""
        return (
            f"{join(self.path, self.not_versions[0])}{more}: named like a version but no UTC time (such as "
            f"{VERSION_EXAMPLE}), so no version: refreshes leave it alone; rename or move it out of {self.path}"
        )

    def what(self) -> str:
        """What it is, and what says so: `a refresh root (it holds LATEST)`."""
        signs = [*self.manifests, *([LATEST_NAME] if self.latest is not None else [])]
        if not signs and self.versions:
            signs = [f"version folders such as {self.versions[-1]}"]
        return self.kind + (f" (it holds {' and '.join(signs)})" if signs else "")

    def describe(self) -> str:
        """`/data/x is a refresh root (it holds LATEST)`."""
        return f"{self.path} is {self.what()}"


def folder_kind(
    path: str, read_text: Callable[[str], str | None], list_names: Callable[[str], list[str]]
) -> FolderKind:
    """What `path` is (module docstring). Raises versions.LatestPointerError for a LATEST that
    names no folder below ROOT."""
    names = {name.rstrip("/") for name in list_names(path)}
    manifests = tuple(name for name in (MANIFEST_NAME, REJECTED_MANIFEST_NAME) if name in names)
    latest = _read_pointer(path, read_text) if LATEST_NAME in names else None
    versions = tuple(sorted(name for name in names if is_version(name)))
    root = latest is not None or any(is_run_version(name) for name in versions)
    kind = MIX if root and manifests else ROOT if root else DATASET if manifests else NEITHER
    not_versions = tuple(sorted(name for name in names if named_like_a_version(name) and not is_version(name)))
    return FolderKind(path, kind, manifests, latest, versions, not_versions)


def dataset_folder(path: str, read_text: Callable[[str], str | None], list_names: Callable[[str], list[str]]) -> str:
    """The folder a reader given `path` reads: `path` itself, or the version a ROOT's LATEST names.
    Raises FolderKindError for a ROOT that names no version yet, and for a mix."""
    found = folder_kind(path, read_text, list_names)
    if found.kind == MIX:
        pick = f": give the dataset folder itself, such as {join(path, found.latest)}" if found.latest else ""
        raise FolderKindError(
            f"{found.describe()}, so a reader cannot tell which dataset is meant{pick}; or move one of them to a "
            "folder of its own"
        )
    if found.kind == ROOT and found.latest is None:
        raise FolderKindError(
            f"{found.describe()} but no LATEST: no version of it was published yet (a refresh that passes its "
            "checks publishes one)"
        )
    return join(path, found.latest) if found.kind == ROOT else path


def _read_pointer(root: str, read_text: Callable[[str], str | None]) -> str | None:
    """The version ROOT/LATEST names, or None when ROOT has no LATEST."""
    path = join(root, LATEST_NAME)
    try:
        text = read_text(path)
    except Exception as e:  # re-raised unless it means "missing"
        if _is_not_found(e):
            return None
        raise
    return None if text is None else parse_pointer(text, path)


def _is_not_found(error: BaseException) -> bool:
    if isinstance(error, FileNotFoundError):
        return True
    # tf.errors.NotFoundError, google.api_core.exceptions.NotFound, Beam's wrappers of either.
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & {"NotFoundError", "NotFound"}:
        return True
    causes = getattr(error, "exception_details", None) or {}
    return bool(causes) and all(_is_not_found(e) for e in causes.values() if isinstance(e, BaseException))
