"""Appending records to local shard parts that several writers share, each record one piece.

Whichever thread or process converts an image appends its record to the part it was given (the
bundle's process hands out parts and closes them: transforms.shard_parts.SharedParts). Each record
is framed as a TFRecord and, in a GZIP part, made into a self-contained piece of the member
(stored blocks: transforms.gzip_pieces); one write on a file opened with O_APPEND puts it whole at
the end of the file, whoever else appends, and the Piece returned says where it landed. Records
worth deflating are not appended (gzip_pieces says why): an appender decides on its first record,
as transforms.gzip_choice decides for a stream, and hands such records back for the bundle to
write as one deflated stream per shard.

No Beam here: the converting processes (transforms.convert_pool) import this module.
"""

from __future__ import annotations

import os
import re
import threading

from isal import isal_zlib

from core.contract.layout import GZIP
from core.tfrecord_framing import framed
from transforms.gzip_choice import SAMPLE_BYTES, worth_compressing
from transforms.gzip_pieces import Piece, stored

# Local file systems, where O_APPEND writes from several processes land whole, one after another.
# Network ones (NFS, SMB, FUSE mounts) may not: there the converting processes hand records back.
APPENDING_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "reiserfs", "bcachefs", "tmpfs", "overlay"}
)
_MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")  # /proc/mounts writes a space in a mount point as \040


def processes_may_append(path: str, mounts: str | None = None) -> bool:
    """Whether processes may share part files below `path`: True where the mount holding it (the
    longest mount point of `mounts`, /proc/self/mounts by default) has a type of
    APPENDING_FILE_SYSTEMS; False elsewhere, and where that cannot be told (not Linux)."""
    if mounts is None:
        try:
            with open("/proc/self/mounts", encoding="utf-8", errors="surrogateescape") as f:
                mounts = f.read()
        except OSError:
            return False
    target, found, kind = os.path.realpath(path), "", None
    for fields in (line.split() for line in mounts.splitlines()):
        if len(fields) < 3:
            continue
        point = _MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[1])
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(found):
            found, kind = point, fields[2]  # of one mount point listed twice, the later is seen
    return kind in APPENDING_FILE_SYSTEMS


class ShortWrite(OSError):
    """A piece was written in part (a full disk): the part cannot be trusted."""


class PartAppender:
    """Appends framed records to part files of `compression` (GZIP or NONE, as a manifest says).
    Thread-safe; keeps each part open until `release`."""

    def __init__(self, compression: str):
        self._gzip = compression == GZIP
        self._deflating: bool | None = None  # GZIP: whether records are worth deflating (first record)
        self._files: dict[str, int] = {}
        self._lock = threading.Lock()

    def append(self, part: str, payload: bytes) -> Piece | None:
        """Where the record landed in `part`; None when it was not appended (worth deflating)."""
        data = b"".join(framed(payload))
        if not self._gzip:
            body, crc = data, 0
        else:
            if self._deflating is None:
                self._deflating = worth_compressing(data[:SAMPLE_BYTES])
            if self._deflating:
                return None
            body, crc = stored(data), isal_zlib.crc32(data)
        with self._lock:  # the write and the offset it leaves, with no other write of this process between
            fd = self._files.get(part)
            if fd is None:
                fd = self._files[part] = os.open(part, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            written = os.write(fd, body)
            end = os.lseek(fd, 0, os.SEEK_CUR)
        if written != len(body):
            raise ShortWrite(f"{part}: wrote {written} of a record's {len(body)} bytes")
        return Piece(end - len(body), len(body), crc, len(data))

    def release(self) -> None:
        """Closes every part this appender has open."""
        with self._lock:
            files, self._files = self._files, {}
        for fd in files.values():
            os.close(fd)
