"""ArrayRecord shard files (format: array_record), written and read whole, local or gs://.

array_record's writer and reader take local paths only. A local shard is written under a fresh
hidden name beside it (core.contract.layout.temporary_name) and renamed into place; a gs:// shard
is written to a local temporary file and uploaded whole (an object appears whole or not at all).
Either way a repeated write replaces the shard with the same bytes. A gs:// shard is read through
a local temporary copy.

The writer's options are those Grain and TFDS write with: `group_size:1` puts each record in a
chunk of its own, so a random read decompresses that record only (Grain's ArrayRecordDataSource
warns about any other group size); the chunks are compressed with zstd at level 3, array_record's
default, spelled out so that the manifest's record of them stays true.

No Beam, for local files (remote ones load core.storage when one is read or written): a local
run reads its shards back in processes of its own (pipeline.shard_check).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator

from core.contract.layout import is_remote, temporary_name
from core.local_files import check_regular

WRITER_OPTIONS = "group_size:1,zstd:3"
_COPY_BYTES = 1 << 20


class ArrayRecordError(Exception):
    """A shard cannot be read past record `record` (0-based): not an ArrayRecord file, truncated,
    or a chunk whose hash does not match its bytes."""

    def __init__(self, record: int, message: str):
        super().__init__(message)
        self.record, self.message = record, message


def _module():
    """array_record's reader and writer (a compiled module: loaded when a run or a reader needs it)."""
    try:
        from array_record.python import array_record_module
    except ImportError as e:
        raise ImportError(f"format array_record needs the array-record package (pip install array-record): {e}") from e
    return array_record_module


def write_shard(path: str, records: Iterable[bytes]) -> int:
    """Writes `records` as the ArrayRecord file at `path` (local or gs://), replacing any file
    there in one step; returns how many. Raises OSError when the file cannot be written."""
    name = path.rsplit("/", 1)[-1]
    if not is_remote(path):
        temporary = os.path.join(os.path.dirname(path), temporary_name(name, uuid.uuid4().hex))
        try:
            written = _write_local(temporary, records)
            os.replace(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        return written
    from core import storage  # Beam: only for remote shards (module docstring)

    with tempfile.TemporaryDirectory() as folder:
        local = os.path.join(folder, name)
        written = _write_local(local, records)
        with open(local, "rb") as f, storage.create(path) as out:
            shutil.copyfileobj(f, out, _COPY_BYTES)
    return written


def _write_local(path: str, records: Iterable[bytes]) -> int:
    writer = _module().ArrayRecordWriter(path, WRITER_OPTIONS)
    written = 0
    try:
        for record in records:
            writer.write(record)
            written += 1
        writer.close()
    except RuntimeError as e:  # array_record reports I/O failures so
        raise OSError(f"{path}: cannot write ArrayRecord file: {e}") from e
    return written


def read_records(path: str, *, inside: str | None) -> Iterator[bytes]:
    """Every record of the ArrayRecord file at `path` (local or gs://), in order, each chunk's hash
    checked as it is read. Raises ArrayRecordError naming the record where the file cannot be read
    on (0 for a file that is not a whole ArrayRecord file). A local file must be a regular file
    inside the folder `inside` (core.local_files.check_regular: array_record opens it by name)."""
    with _local_copy(path, inside) as local:
        reader = _module().ArrayRecordReader(local)
        read = 0
        try:
            if not reader.ok():
                raise ArrayRecordError(0, _why_unreadable(reader))
            for _ in range(reader.num_records()):
                record = reader.read()
                yield record
                read += 1
            reader.close()  # says what went wrong past the last record, if anything did
        except RuntimeError as e:
            raise ArrayRecordError(read, str(e)) from None
        finally:
            with contextlib.suppress(RuntimeError):  # a reader that failed says so again
                reader.close()


def _why_unreadable(reader) -> str:
    """What array_record says about a file it could not open as an ArrayRecord file."""
    try:
        reader.read_all()
    except RuntimeError as e:
        return f"not a whole ArrayRecord file: {e}"
    return "not a whole ArrayRecord file"


@contextlib.contextmanager
def _local_copy(path: str, inside: str | None) -> Iterator[str]:
    """`path` itself when local (checked: core.local_files.check_regular), else a temporary local
    copy of it, removed afterwards."""
    if not is_remote(path):
        check_regular(path, inside=inside)
        yield path
        return
    from core import storage  # Beam: only for remote shards (module docstring)

    with tempfile.TemporaryDirectory() as folder:
        local = os.path.join(folder, path.rsplit("/", 1)[-1])
        with storage.open_binary(path, inside=inside) as f, open(local, "wb") as out:
            shutil.copyfileobj(f, out, _COPY_BYTES)
        yield local
