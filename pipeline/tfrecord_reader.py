"""Reading a TFRecord shard (GZIP or uncompressed) back record by record, checking what
TensorFlow's reader checks (the GZIP stream, each record's framing and both CRCs) but saying where
a file breaks: the record number and the reason. Plain Python over pipeline.storage, so it runs
without TensorFlow.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from isal import isal_zlib  # inflates faster than zlib (README, Performance)

from pipeline import storage
from pipeline.contract.layout import GZIP
from pipeline.tfrecord_framing import masked_crc32c

CHUNK_BYTES = 1 << 20


class RecordError(Exception):
    """A shard cannot be read past this point (GZIP or TFRecord framing broken)."""

    def __init__(self, record: int, message: str):
        super().__init__(message)
        self.record, self.message = record, message


def read_records(path: str, compression: str = GZIP) -> Iterator[bytes]:
    """The payloads of a TFRecord file (`compression`: GZIP or NONE, as a manifest says), checking
    the framing and both CRCs of each record. Raises RecordError with the number (0-based) of the
    record where the file cannot be read on."""
    for _, data in read_framed_records(path, compression):
        yield data


def read_framed_records(path: str, compression: str = GZIP) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of each record, as `read_records` checks them: the offset of its 12-byte
    header in the uncompressed stream, so for an uncompressed file an index entry is
    `offset, len(payload) + FRAMING_BYTES`."""
    stream = _Stream(_gunzip(path) if compression == GZIP else _chunks(path))
    index = 0
    try:
        while True:
            offset = stream.offset
            header = stream.read(12)
            if not header:
                stream.finish()
                return
            if len(header) < 12:
                stream.finish()
                raise RecordError(index, f"truncated: only {len(header)} of the 12 header bytes")
            length, length_crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != length_crc:
                raise RecordError(index, "length CRC mismatch (corrupt framing)")
            data, crc = stream.read(length), stream.read(4)
            if len(data) + len(crc) < length + 4:
                stream.finish()
                raise RecordError(index, f"truncated: {len(data) + len(crc)} of {length + 4} bytes of data and CRC")
            if masked_crc32c(data) != struct.unpack("<I", crc)[0]:
                raise RecordError(index, "data CRC mismatch (corrupt record)")
            yield offset, data
            index += 1
    except RecordError as e:
        if e.record < 0:  # from the GZIP layer: name the record being read
            raise RecordError(index, e.message) from None
        raise


class _Stream:
    """Exact-size reads over a shard's (decompressed) chunks; `offset`: the bytes read so far. A
    read within the current chunk is one slice of it, one across chunks one join: each byte is
    copied once on its way to a payload."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._chunk = b""
        self._pos = 0
        self.offset = 0

    def read(self, n: int) -> bytes:
        end = self._pos + n
        if end <= len(self._chunk):
            out = self._chunk[self._pos : end]
            self._pos = end
        else:
            parts, wanted = [memoryview(self._chunk)[self._pos :]], n - (len(self._chunk) - self._pos)
            self._chunk, self._pos = b"", 0
            while wanted > 0 and (chunk := next(self._chunks, None)) is not None:
                if len(chunk) > wanted:
                    self._chunk, self._pos = chunk, wanted
                parts.append(memoryview(chunk)[:wanted])
                wanted -= len(parts[-1])
            out = b"".join(parts)
        self.offset += len(out)
        return out

    def finish(self) -> None:
        """At the end of the records: a GZIP stream must have ended cleanly too."""
        for _ in self._chunks:
            pass


def _chunks(path: str) -> Iterator[bytes]:
    with storage.open_binary(path) as f:
        while chunk := f.read(CHUNK_BYTES):
            yield chunk


def _gunzip(path: str) -> Iterator[bytes]:
    """Decompressed chunks of a (possibly multi-member) GZIP file; RecordError(-1) if corrupt or
    cut short. The record number is filled in by the reader."""
    with storage.open_binary(path) as f:
        decompressor, pending, read = isal_zlib.decompressobj(wbits=31), b"", 0
        while True:
            if not pending:
                pending = f.read(CHUNK_BYTES)
                read += len(pending)
                if not pending:
                    break
            try:
                out = decompressor.decompress(pending)
            except isal_zlib.error as e:
                raise RecordError(-1, f"corrupt GZIP data (within the first {read} bytes): {e}") from e
            if out:
                yield out
            if decompressor.eof:  # end of a member: another may follow
                pending = decompressor.unused_data
                decompressor = isal_zlib.decompressobj(wbits=31) if pending else None
                if decompressor is None:
                    pending = f.read(CHUNK_BYTES)
                    read += len(pending)
                    if not pending:
                        return
                    decompressor = isal_zlib.decompressobj(wbits=31)
            else:
                pending = b""
        if not decompressor.eof:
            raise RecordError(-1, f"the GZIP stream ends early after {read} bytes (file truncated)")
