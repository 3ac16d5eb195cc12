"""Opening a local input file without waiting or reading forever.

A FIFO's open waits for a writer, and a device read through a link (`x.csv -> /dev/zero`) never
ends, so a run given one would hang: only regular files (or links to them) are input, and the
rest raise NotARegularFile, which callers turn into a dead letter or a refusal naming the file.
A link whose target does not exist is named by `dangling`, for listings that would drop it.
No Beam: the converting processes (transforms.image_convert) and the process entry, before Beam
is imported (pipeline.unused_modules, reading the config file), open their files here too.
Settings files are read here (load_yaml), so every command refuses one that is not UTF-8 or not
YAML in the same words.
"""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


class NotARegularFile(OSError):
    """A local input that is a FIFO, socket, device or folder, or a link to one."""


class NotYaml(ValueError):
    """Settings that are not UTF-8 text or not YAML. The message (`is not valid YAML: ...`) says
    why and where; the caller puts the file or flag in front of it, for its refusal."""


def not_regular(path: str, mode: int) -> str | None:
    """Why the file at `path`, whose (followed) st_mode is `mode`, is not input; None when it is a
    regular file."""
    if stat.S_ISREG(mode):
        return None
    what = next((name for is_kind, name in _KINDS if is_kind(mode)), "not a file")
    if os.path.islink(path):
        what = f"a link to {os.path.realpath(path)}, {what}"
    return f"not a regular file: {what}"


def dangling(path: str) -> str | None:
    """'a link to TARGET, which does not exist (dangling link)' when `path` is a symbolic link
    whose target (followed to the end) is absent, else None. Listings stat each file and drop one
    they cannot stat, so a dangling link would vanish from the run without a word."""
    if os.path.islink(path) and not os.path.exists(path):
        return f"a link to {os.path.realpath(path)}, which does not exist (dangling link)"
    return None


def open_regular(path: str) -> BinaryIO:
    """`path` open for binary reading if it is a regular file (or a link to one), else
    NotARegularFile saying what it is."""
    try:
        # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer; regular
        # files read as they would without it.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:  # a socket cannot be opened at all (ENXIO): say what it is
        reason = _stat_reason(path)
        if reason:
            raise NotARegularFile(reason) from e
        raise
    try:
        reason = not_regular(path, os.fstat(handle).st_mode)
        if reason:
            raise NotARegularFile(reason)
    except BaseException:
        os.close(handle)
        raise
    return open(handle, "rb")


def load_yaml(path: str) -> Any:
    """The YAML document in the settings file at `path` (None when empty), opened by open_regular
    (OSError when it cannot be read); NotYaml when it is not UTF-8 or not YAML. Decoded whole, so
    the offset of a bad byte is the file's, not that of a buffer."""
    with open_regular(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise NotYaml(f"is not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start} (line {line})") from e
    return parse_yaml(text)


def parse_yaml(text: str) -> Any:
    """The YAML value of `text`; NotYaml, on one line, when it is not YAML."""
    import yaml  # here only: the converting processes import this module and read no YAML

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise NotYaml(f"is not valid YAML: {' '.join(str(e).split())}") from e


def _stat_reason(path: str) -> str | None:
    try:
        return not_regular(path, os.stat(path).st_mode)
    except OSError:
        return None
