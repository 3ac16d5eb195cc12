"""Writing local files without ever writing through a link.

A run writes into folders others may also write to (DEST, ROOT): a link planted under a name the
run writes (`.lease.tmp`, `LATEST.tmp`, a shard's name) must not make it overwrite the file the
link points to. So a file is always created new and exclusively (O_CREAT | O_EXCL | O_NOFOLLOW),
which fails on any existing name, a link included: a name the run replaces is unlinked first (the
link itself goes, never its target), and a file that replaces another atomically is written under
a fresh random name (in the run's own folder when it replaces a name others read) and renamed over
it (a rename replaces a link, never follows it).

No Beam: the processes that read shards back and write their indexes (pipeline.shard_check)
import this module; core.storage builds its local writes on it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import BinaryIO

from core.contract.layout import temporary_name

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkOnPath(OSError):
    """A folder a run would write or delete below is a symbolic link (or not a folder)."""


def real_folder(folder: str, make: bool) -> bool:
    """Whether `folder` is a folder and not a link: made when missing and `make` (another process
    making it at the same time is no error). A link or a file under its name raises LinkOnPath, so
    a file written or deleted below it never lands outside."""
    if make:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
        raise LinkOnPath(errno.ELOOP, f"{what} where a dataset's folder goes: left alone", folder)
    return True


def create_new(path: str) -> BinaryIO:
    """`path` opened for writing as a new, empty file: a file (or link) already under that name
    is unlinked first, as a retried step's earlier output is. Its folder must exist."""
    try:
        handle = os.open(path, _NEW_FILE, 0o644)
    except FileExistsError:
        os.unlink(path)
        handle = os.open(path, _NEW_FILE, 0o644)
    return open(handle, "wb")


def create_exclusive(path: str) -> BinaryIO | None:
    """`path` opened for writing if nothing (not even a link) is under that name; else None."""
    try:
        return open(os.open(path, _NEW_FILE, 0o644), "wb")
    except FileExistsError:
        return None


def replace_atomically(path: str, data: bytes, folder: str | None = None) -> None:
    """Replaces the file at `path` with `data` in one step (readers see the old bytes or the new),
    written under a fresh random name first: in `folder` (a run's own folder on the same file
    system, where a write stopped halfway leaves it), else beside `path`."""
    stream, temporary = _fresh(path, folder or os.path.dirname(os.path.abspath(path)), create_exclusive)
    try:
        with stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def link_into_place(source: str, destination: str) -> None:
    """Gives `destination` the bytes of the file `source` in one step: a hard link under a fresh
    random name beside `source` (in the run's own folder, where a copy stopped halfway leaves it),
    renamed over `destination`. A rename onto a name of the same file does nothing (POSIX), as
    when a repeated step links a file that is in place already: the link it made then goes."""
    _, temporary = _fresh(destination, os.path.dirname(os.path.abspath(source)), lambda name: _linked(source, name))
    os.replace(temporary, destination)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)  # still there only when destination was that file already


def _fresh(path: str, folder: str, make):
    """`make(name)` for a fresh random name in `folder` standing for `path` (layout.temporary_name)
    until it returns something (not None: the name was free); that and the name."""
    name = os.path.basename(os.path.abspath(path))
    for _ in range(100):
        temporary = os.path.join(folder, temporary_name(name, secrets.token_hex(6)))
        made = make(temporary)
        if made is not None:
            return made, temporary
    raise FileExistsError(f"no free temporary name for {path} in {folder}")


def _linked(source: str, name: str) -> bool | None:
    try:
        os.link(source, name, follow_symlinks=False)
    except FileExistsError:
        return None
    return True
