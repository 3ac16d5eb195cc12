"""TFRecord framing, as TensorFlow's reader checks it: per record, the payload's length (8 bytes,
little-endian) and its masked CRC-32C, the payload, and the payload's masked CRC-32C."""

from __future__ import annotations

import struct

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
