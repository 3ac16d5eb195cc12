"""Files on local disk and gs:// alike, through Beam's FileSystems: the project's only file I/O
outside TensorFlow's readers.

Everything is read and written uncompressed as stored (Beam would otherwise guess compression
from the extension), except `open_text`, which unwraps `.gz` for CSV readers.
Local files are read only when regular: a FIFO, socket or device (or a link to one) raises
NotARegularFile instead of hanging the run (pipeline.local_files).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import hashlib
import io
import os
import re
import tempfile
from collections.abc import Iterator
from typing import NamedTuple

from apache_beam.io.filesystem import CompressionTypes, FileMetadata, FileSystem
from apache_beam.io.filesystems import FileSystems

from pipeline.contract.layout import TEMPORARY_SUFFIX, is_remote
from pipeline.local_files import dangling, open_regular

_AS_STORED = CompressionTypes.UNCOMPRESSED
_GLOB = re.compile(r"[*?\[]")  # where a pattern's wildcards start, as Beam's `match` finds it


def absolute(uri: str) -> str:
    """Local paths made absolute (so keys below them are stable); URIs as they are."""
    return uri if is_remote(uri) else os.path.abspath(uri)


def parent(path: str) -> str:
    return FileSystems.split(path)[0]


def basename(path: str) -> str:
    return FileSystems.split(path)[1]


def pattern_root(pattern: str) -> str:
    """The folder part of a file pattern before its first wildcard."""
    head = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
    return head.rsplit("/", 1)[0] if "/" in head else "."


def has_filesystem(uri: str) -> bool:
    """Whether an installed Beam filesystem reads `uri`'s scheme (local paths: always)."""
    try:
        FileSystems.get_filesystem(uri)
    except ValueError:
        return False
    return True


def bucket_exists(name: str) -> bool:
    """False only when GCS says the bucket does not exist (an account that may not look at
    buckets gets True: the run itself then says what it cannot do)."""
    from google.api_core.exceptions import Forbidden

    try:
        return _gcs_client(os.environ.get("STORAGE_EMULATOR_HOST")).bucket(name).exists()
    except Forbidden:
        return True


def match(*patterns: str) -> list[FileMetadata]:
    """Metadata (path, size, mtime) of every file matching any of the glob patterns."""
    return [m for result in FileSystems.match(list(patterns)) for m in result.metadata_list]


class Unlisted(NamedTuple):
    """Something below a folder that a listing found but could not list or stat: a folder it
    cannot read, a symbolic link to a folder (not followed), a dangling link."""

    path: str  # as the OS gave it (may hold surrogate escapes on a non-UTF-8 name)
    reason: str


def list_below(folder: str) -> Iterator[FileMetadata | Unlisted]:
    """Every file below `folder`, at any depth, with what could not be listed reported as
    `Unlisted` instead of silently left out. Beam's local `match` walks with `os.walk` and no
    error handler, so an unreadable sub-folder (and everything below it) or a dangling link
    vanishes from its listing; gs:// has no such cases, and a failed list call raises."""
    if is_remote(folder):
        yield from match(folder.rstrip("/") + "/**")
        return
    if not os.path.isdir(folder):
        return
    failed: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(folder, onerror=failed.append):
        yield from _unlisted_folders(failed)
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                yield Unlisted(path, "a symbolic link to a folder: not followed (link or copy the files instead)")
        for name in filenames:
            entry = _listed_file(os.path.join(dirpath, name))
            if entry is not None:
                yield entry
    yield from _unlisted_folders(failed)


def _listed_file(path: str) -> FileMetadata | Unlisted | None:
    """A local file's metadata; Unlisted when it cannot be stat'ed (a dangling link, ...); None
    when it is gone (deleted while listing: no longer input)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        reason = dangling(path)
        return Unlisted(path, reason) if reason else None
    except OSError as e:
        return Unlisted(path, f"cannot read its size: {type(e).__name__}: {e.strerror or e}")
    return FileMetadata(path, stat.st_size, stat.st_mtime)


def list_matching(pattern: str) -> Iterator[FileMetadata | Unlisted]:
    """Every file the glob pattern matches, as `match` finds them, and as `Unlisted` each match
    that cannot be stat'ed (a dangling link, a link loop), and each folder the listing could not
    enter (unreadable, or a link to a folder) that could hold matches (`_could_hold_match`): Beam's
    local `match` drops all of these without a word. gs:// has no such cases."""
    if is_remote(pattern):
        yield from match(pattern)
        return
    if pattern.endswith("/"):
        pattern += "*"  # as `match` reads it
    prefix = _GLOB.split(pattern, 1)[0]
    if prefix == pattern:  # no wildcard: the file itself
        entry = _listed_file(pattern)
        if entry is not None:
            yield entry
        return
    matches = re.compile(FileSystem.translate_pattern(pattern)).match  # `match`'s own syntax
    for entry in list_below(os.path.dirname(prefix)):
        if isinstance(entry, Unlisted) and os.path.isdir(entry.path):  # a folder it could not enter
            if _could_hold_match(pattern, entry.path):
                yield entry._replace(reason=entry.reason + "; it may hold files the pattern matches")
        elif matches(entry.path):
            yield entry


def _could_hold_match(pattern: str, folder: str) -> bool:
    """Whether files below `folder` could match the glob `pattern`, so that a folder the listing
    cannot enter is reported exactly when it could hide input, and never when it could not (no
    false errors). Compared component by component, split at `/`: each of the folder's must match
    the pattern's at the same depth, and the folder must lie above the pattern's last component
    (`root/*/x.csv`: `root/a` could, `root/a/b` could not; `root/*.csv`: `root/sub` could not). A
    component holding `**` spans folders, so from the first one on anything could. A `?` or
    `[...]` standing for a `/` (Beam's syntax allows it) is not foreseen."""
    parts, names = pattern.split("/"), folder.split("/")
    for part, name in zip(parts, names, strict=False):  # the shorter one ends the comparison
        if "**" in part:
            return True
        if not re.fullmatch(FileSystem.translate_pattern(part), name):
            return False
    return len(names) < len(parts)


def _unlisted_folders(failed: list[OSError]) -> Iterator[Unlisted]:
    while failed:
        e = failed.pop(0)
        yield Unlisted(e.filename, f"cannot list this folder: {type(e).__name__}: {e.strerror or e}")


def files_below(folder: str) -> list[str]:
    return [m.path for m in match(folder.rstrip("/") + "/**")]


def children(folder: str) -> list[str]:
    """The names directly below `folder`, folders included (a local folder may hold empty ones,
    which `match` does not list)."""
    if is_remote(folder):
        prefix = folder.rstrip("/") + "/"
        return sorted({path[len(prefix) :].split("/", 1)[0] for path in files_below(folder)})
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def read_bytes(path: str) -> bytes:
    with open_binary(path) as f:
        return f.read()


def read_text(path: str, errors: str = "strict") -> str | None:
    """The UTF-8 text of a file, or None when there is no such file."""
    if not FileSystems.exists(path):
        return None
    return read_bytes(path).decode("utf-8", errors)


def open_binary(path: str):
    """A binary stream of the file's bytes as stored (read in chunks by the caller). A local path
    must be a regular file (or a link to one), else NotARegularFile: a FIFO or device would hang
    the reader (pipeline.local_files)."""
    if not is_remote(path):
        return open_regular(path)
    return FileSystems.open(path, compression_type=_AS_STORED)


def open_text(uri: str, errors: str = "strict") -> io.TextIOWrapper:
    """A UTF-8 text stream of a plain or .gz file, ready for `csv` (Beam's own decompressing
    reader is not an `io` stream, so gzip is unwrapped here)."""
    raw = open_binary(uri)
    if CompressionTypes.detect_compression_type(uri) == CompressionTypes.GZIP:
        raw = gzip.GzipFile(fileobj=raw)
    return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, newline="")


def text_lines(uri: str) -> Iterator[str]:
    """The lines of a text file (plain or .gz), with their line ends; bytes that are not UTF-8
    as surrogates (errors="surrogateescape": transforms.sources.not_utf8 finds them)."""
    with open_text(uri, errors="surrogateescape") as text:
        yield from text


def write_bytes(path: str, data: bytes, mime_type: str = "application/octet-stream") -> None:
    """Writes a whole file (creating a local file's folders)."""
    if not is_remote(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with FileSystems.create(path, mime_type=mime_type, compression_type=_AS_STORED) as f:
        f.write(data)


def write_atomically(path: str, text: str) -> None:
    """Write to a temporary name, then rename: readers see the whole file or none."""
    temporary = path + TEMPORARY_SUFFIX
    write_bytes(temporary, text.encode("utf-8"))
    FileSystems.rename([temporary], [path])


def copy(source: str, destination: str) -> None:
    """Replaces `destination` with `source`'s bytes in one step: a hard link renamed into place
    locally, a server-side rewrite on GCS (objects are replaced whole)."""
    if is_remote(source):
        FileSystems.copy([source], [destination])
        return
    temporary = destination + TEMPORARY_SUFFIX
    if os.path.lexists(temporary):
        os.remove(temporary)
    os.link(source, temporary)
    os.replace(temporary, destination)


def missing_folders(path: str) -> list[str]:
    """The folders above a local `path` that do not exist yet, nearest first: what writing it
    creates (none on GCS, which has no folders)."""
    if is_remote(path):
        return []
    missing, folder = [], os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing


def remove_empty_folders(folders: list[str]) -> None:
    """Removes `folders` in order while each is empty: missing_folders' result, once the file
    written there is gone."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:  # not empty (or gone, or not ours to remove): the rest are above it
            return


# Conditional writes, for a lease that two processes must never both hold: a file is created only
# if absent, and replaced or deleted only if nobody changed it since it was read (its `token`: the
# object generation on GCS, a hash of the bytes locally, compared under an flock on the folder). Beam's
# FileSystems has no preconditions, so gs:// goes through google-cloud-storage directly.


def create_exclusive(path: str, data: bytes) -> str | None:
    """Creates the file with `data` if there is none; its token, or None when it already exists."""
    if is_remote(path):
        from google.api_core.exceptions import PreconditionFailed

        blob = _blob(path)
        try:
            blob.upload_from_string(data, if_generation_match=0)
        except PreconditionFailed:
            return None
        return str(blob.generation)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return None
    with os.fdopen(handle, "wb") as f:
        f.write(data)
    return _digest(data)


def read_with_token(path: str) -> tuple[bytes, str] | None:
    """The file's bytes and token, or None when there is no such file."""
    if is_remote(path):
        from google.api_core.exceptions import NotFound

        blob = _blob(path).bucket.get_blob(_blob(path).name)
        if blob is None:
            return None
        try:
            return blob.download_as_bytes(if_generation_match=blob.generation), str(blob.generation)
        except NotFound:
            return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return data, _digest(data)


def replace_if_unchanged(path: str, data: bytes, token: str) -> str | None:
    """Replaces the file with `data` if its token is still `token`; the new token, or None."""
    if is_remote(path):
        from google.api_core.exceptions import NotFound, PreconditionFailed

        blob = _blob(path)
        try:
            blob.upload_from_string(data, if_generation_match=int(token))
        except (PreconditionFailed, NotFound):
            return None
        return str(blob.generation)
    with _local_lock(path):
        current = read_with_token(path)
        if current is None or current[1] != token:
            return None
        temporary = path + TEMPORARY_SUFFIX
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    return _digest(data)


def delete_if_unchanged(path: str, token: str) -> bool:
    """Deletes the file if its token is still `token`."""
    if is_remote(path):
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            _blob(path).delete(if_generation_match=int(token))
        except (PreconditionFailed, NotFound):
            return False
        return True
    with _local_lock(path):
        current = read_with_token(path)
        if current is None or current[1] != token:
            return False
        os.remove(path)
    return True


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def _gcs_client(endpoint: str | None):
    """One client per endpoint (STORAGE_EMULATOR_HOST, when set, as Beam's own client honours it)."""
    from google.cloud import storage as gcs

    return gcs.Client()


def _blob(path: str):
    bucket, _, name = path[len("gs://") :].partition("/")
    return _gcs_client(os.environ.get("STORAGE_EMULATOR_HOST")).bucket(bucket).blob(name)


@contextlib.contextmanager
def _local_lock(path: str):
    """An exclusive flock on the file's folder, held across a read-compare-write (no lock file)."""
    handle = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def delete(paths: list[str]) -> None:
    if paths:
        FileSystems.delete(paths)


def delete_folder(folder: str) -> None:
    """Everything below `folder` (a gs:// prefix has no folder object to delete)."""
    if is_remote(folder):
        delete(files_below(folder))
    elif FileSystems.exists(folder):
        FileSystems.delete([folder])  # local: removes the directory tree


def fetch_to_temp(uri: str, suffix: str = "") -> str:
    """A local temporary copy of a (small) file; the caller owns it."""
    handle, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(handle, "wb") as out:
        out.write(read_bytes(uri))
    return path
