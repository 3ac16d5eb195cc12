"""TFRecord framing, as TensorFlow's reader checks it: per record, the payload's length (8 bytes,
little-endian) and its masked CRC-32C, the payload, and the payload's masked CRC-32C."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import google_crc32c

FRAMING_BYTES = 16  # per record: length (8), its CRC (4), the payload's CRC (4)

# The largest Example TensorFlow 2.21 parses: one byte more and parse_example crashes the reading
# process (at exactly 2**31 bytes) or reports its features missing (tests/transforms/
# test_example_proto.py checks both against TF). The writer never frames a longer payload, and a
# reader trusts no length field that claims one.
MAX_EXAMPLE_BYTES = 2**31 - 1


def masked_crc32c(data) -> int:
    """TFRecord's masked CRC-32C."""
    return masked(google_crc32c.value(bytes(data)))


def masked(crc: int) -> int:
    """A CRC-32C as TFRecord stores it (masked, so that a CRC of data holding CRCs stays strong)."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def framed(payload: bytes) -> tuple[bytes, bytes, bytes]:
    """One record's bytes in three pieces (header, payload, trailer), to write without joining them."""
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", masked_crc32c(length)), payload, struct.pack("<I", masked_crc32c(payload))


def unframed(read) -> Iterator[bytes]:
    """The payloads of a stream of framed records, `read(n)` giving its next n bytes (fewer only
    at its end), both CRCs of each checked: the inverse of `framed`. Raises ValueError where the
    stream is not whole framed records."""
    while header := read(12):
        if len(header) < 12 or masked_crc32c(header[:8]) != struct.unpack("<I", header[8:])[0]:
            raise ValueError("corrupt or truncated record header")
        (length,) = struct.unpack("<Q", header[:8])
        if length > MAX_EXAMPLE_BYTES:
            raise ValueError(f"record length {length:,} is over {MAX_EXAMPLE_BYTES:,} bytes (corrupt header)")
        payload, crc = read(length), read(4)
        if len(payload) < length or len(crc) < 4 or masked_crc32c(payload) != struct.unpack("<I", crc)[0]:
            raise ValueError("corrupt or truncated record")
        yield payload
