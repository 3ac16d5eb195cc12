"""Files on local disk and gs:// alike, through Beam's FileSystems: the project's only file I/O
outside TensorFlow's readers.

Everything is read and written uncompressed as stored (Beam would otherwise guess compression
from the extension), except `open_text`, which unwraps `.gz` for CSV readers.
"""

from __future__ import annotations

import gzip
import io
import os
import tempfile
from collections.abc import Iterator

from apache_beam.io.filesystem import CompressionTypes, FileMetadata
from apache_beam.io.filesystems import FileSystems

from pipeline.contract.layout import TEMPORARY_SUFFIX

_AS_STORED = CompressionTypes.UNCOMPRESSED


def is_remote(uri: str) -> bool:
    return "://" in uri


def absolute(uri: str) -> str:
    """Local paths made absolute (so keys below them are stable); URIs as they are."""
    return uri if is_remote(uri) else os.path.abspath(uri)


def parent(path: str) -> str:
    return FileSystems.split(path)[0]


def basename(path: str) -> str:
    return FileSystems.split(path)[1]


def match(*patterns: str) -> list[FileMetadata]:
    """Metadata (path, size, mtime) of every file matching any of the glob patterns."""
    return [m for result in FileSystems.match(list(patterns)) for m in result.metadata_list]


def files_below(folder: str) -> list[str]:
    return [m.path for m in match(folder.rstrip("/") + "/**")]


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def read_bytes(path: str) -> bytes:
    with FileSystems.open(path, compression_type=_AS_STORED) as f:
        return f.read()


def read_text(path: str, errors: str = "strict") -> str | None:
    """The UTF-8 text of a file, or None when there is no such file."""
    if not FileSystems.exists(path):
        return None
    return read_bytes(path).decode("utf-8", errors)


def open_binary(path: str):
    """A binary stream of the file's bytes as stored (read in chunks by the caller)."""
    return FileSystems.open(path, compression_type=_AS_STORED)


def open_text(uri: str, errors: str = "strict") -> io.TextIOWrapper:
    """A UTF-8 text stream of a plain or .gz file, ready for `csv` (Beam's own decompressing
    reader is not an `io` stream, so gzip is unwrapped here)."""
    raw = open_binary(uri)
    if CompressionTypes.detect_compression_type(uri) == CompressionTypes.GZIP:
        raw = gzip.GzipFile(fileobj=raw)
    return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, newline="")


def text_lines(uri: str) -> Iterator[str]:
    """The lines of a text file (plain or .gz), with their line ends."""
    with open_text(uri) as text:
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
