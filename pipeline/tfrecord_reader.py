"""Reading a TFRecord shard (GZIP or uncompressed) back record by record, checking what
TensorFlow's reader checks (the GZIP stream, each record's framing and both CRCs) but saying where
a file breaks: the record number and the reason. A length field is trusted no further than
MAX_EXAMPLE_BYTES, and a payload is read CHUNK_BYTES at a time, so a length the file does not back
is "truncated" without the claimed size ever being allocated. Plain Python, so it runs without
TensorFlow, and without Beam for local files (remote ones load core.storage when one is read),
so a local run reads its shards back in processes of its own (pipeline.shard_check).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from isal import igzip_lib  # inflates faster than zlib (README, Performance)

from core.contract.layout import GZIP, is_remote
from core.local_files import open_regular
from core.tfrecord_framing import FRAMING_BYTES, MAX_EXAMPLE_BYTES, masked_crc32c

CHUNK_BYTES = 1 << 20


class RecordError(Exception):
    """A shard cannot be read past this point (GZIP or TFRecord framing broken)."""

    def __init__(self, record: int, message: str):
        super().__init__(message)
        self.record, self.message = record, message


def read_records(path: str, compression: str = GZIP, *, inside: str | None) -> Iterator[bytes]:
    """The payloads of a TFRecord file (`compression`: GZIP or NONE, as a manifest says), checking
    the framing and both CRCs of each record. Raises RecordError with the number (0-based) of the
    record where the file cannot be read on. A local file must be a regular file inside the folder
    `inside` (core.local_files.open_regular)."""
    for _, data in read_framed_records(path, compression, inside=inside):
        yield data


def read_framed_records(path: str, compression: str = GZIP, *, inside: str | None) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of each record, as `read_records` checks them: the offset of its 12-byte
    header in the uncompressed stream, so for an uncompressed file an index entry is
    `offset, len(payload) + FRAMING_BYTES`."""
    with _open(path, inside) as f:
        stream = _Gunzip(f) if compression == GZIP else _Exact(f)
        index, offset = 0, 0
        try:
            while header := stream.read(12):
                if len(header) < 12:
                    raise RecordError(index, f"truncated: only {len(header)} of the 12 header bytes")
                length, length_crc = struct.unpack("<QI", header)
                if masked_crc32c(header[:8]) != length_crc:
                    raise RecordError(index, "length CRC mismatch (corrupt framing)")
                if length > MAX_EXAMPLE_BYTES:
                    reason = f"length {length:,} is over the {MAX_EXAMPLE_BYTES:,} bytes TensorFlow parses"
                    raise RecordError(index, f"{reason} (corrupt framing)")
                data, crc = stream.read(length), stream.read(4)
                if len(data) + len(crc) < length + 4:
                    raise RecordError(index, f"truncated: {len(data) + len(crc)} of {length + 4} bytes of data and CRC")
                if masked_crc32c(data) != struct.unpack("<I", crc)[0]:
                    raise RecordError(index, "data CRC mismatch (corrupt record)")
                yield offset, data
                index, offset = index + 1, offset + length + FRAMING_BYTES
        except RecordError as e:
            if e.record < 0:  # from the GZIP layer: name the record being read
                raise RecordError(index, e.message) from None
            raise


def _open(path: str, inside: str | None):
    if is_remote(path):
        from core import storage  # Beam: only for remote shards (module docstring)

        return storage.open_binary(path, inside=inside)
    return open_regular(path, inside=inside)


class _Exact:
    """`read(n)`: the next n bytes of an uncompressed file (fewer only at its end), read
    CHUNK_BYTES at most at a time: a file object allocates the whole size asked for."""

    def __init__(self, f):
        self._f = f

    def read(self, n: int) -> bytes:
        parts = []
        while n > 0 and (data := self._f.read(min(n, CHUNK_BYTES))):
            parts.append(data)
            n -= len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)


class _Gunzip:
    """`read(n)`: the next n decompressed bytes of a (possibly multi-member) GZIP file, fewer only
    at its clean end; RecordError(-1) if it is corrupt or cut short (the reader names the record).
    ISA-L's decompressor returns at most the bytes asked for and keeps the rest of its input, so a
    payload comes out of inflate as bytes of its own, not sliced out of a larger buffer; it is asked
    for CHUNK_BYTES at most, as it sets aside a larger buffer for a larger request."""

    def __init__(self, f):
        self._f = f
        self._member = igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)
        self._read = 0  # compressed bytes read, for messages

    def read(self, n: int) -> bytes:
        parts = []
        while n > 0 and (out := self._inflate(min(n, CHUNK_BYTES))):
            parts.append(out)
            n -= len(out)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _inflate(self, n: int) -> bytes:
        """Up to n decompressed bytes (at least one), or b"" at the end of the file's last member."""
        while True:
            if self._member.eof:  # another member may follow
                data = self._member.unused_data or self._more()
                if not data:
                    return b""
                self._member = igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)
            elif self._member.needs_input:
                data = self._more()
                if not data:
                    raise RecordError(-1, f"the GZIP stream ends early after {self._read} bytes (file truncated)")
            else:
                data = b""
            try:
                out = self._member.decompress(data, n)
            except igzip_lib.IsalError as e:
                raise RecordError(-1, f"corrupt GZIP data (within the first {self._read} bytes): {e}") from e
            if out:
                return out

    def _more(self) -> bytes:
        data = self._f.read(CHUNK_BYTES)
        self._read += len(data)
        return data
