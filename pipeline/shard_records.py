"""The records of one shard file, TFRecord or ArrayRecord, with one error for both: what the
read-back (pipeline.shard_check), `inspect --verify` and the contact sheet read.

Without Beam for local files, as the readers below it (pipeline.tfrecord_reader,
core.array_record_files).
"""

from __future__ import annotations

from collections.abc import Iterator

from core.array_record_files import ArrayRecordError
from core.array_record_files import read_records as read_array_records
from core.contract.layout import ARRAY_RECORD
from pipeline.tfrecord_reader import RecordError, read_framed_records


def read_shard(
    path: str, compression: str, file_format: str, *, inside: str | None
) -> Iterator[tuple[int | None, bytes]]:
    """(offset, payload) of each record of the shard at `path`, as a manifest's `compression` and
    `file_format` say it is stored: the offset of its framing in a TFRecord file
    (read_framed_records), None in an ArrayRecord file, which has its own index. Raises RecordError
    with the number of the record where the file cannot be read on. A local shard must be a
    regular file inside the folder `inside` (core.local_files.open_regular)."""
    if file_format != ARRAY_RECORD:
        yield from read_framed_records(path, compression, inside=inside)
        return
    try:
        for data in read_array_records(path, inside=inside):
            yield None, data
    except ArrayRecordError as e:
        raise RecordError(e.record, e.message) from None
