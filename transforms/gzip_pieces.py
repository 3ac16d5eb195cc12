"""One GZIP member written as independent pieces, by any number of processes appending to one file.

A GZIP stream is a header, deflate data, and a trailer holding the CRC-32 and length of what it
holds. Deflate's stored blocks start and end on a byte boundary and refer to nothing before them,
so pieces of them concatenate in any order: processes converting images can append each record's
piece to a shared shard part (O_APPEND makes each write land whole at the end of the file) and
report where it landed; whoever closes the file folds the pieces' CRCs in file order
(`PieceLedger`) and appends the last block and the trailer. Readers see one ordinary GZIP member.

Only data not worth deflating (transforms.gzip_choice: photos) is written so: deflate's gain on
compressible records comes from what they repeat of each other (the Example's keys, similar
pixels), which a piece compressed on its own cannot refer to (on 1,000 small PNG drawings: 85% of
their bytes as separate pieces, 22% as one stream).

No Beam here: the converting processes (transforms.convert_pool) import this module.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from isal import isal_zlib

# ID1 ID2, deflate, no flags, no mtime, no extra flags, OS unknown (as for a stream made of pieces)
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_LAST_BLOCK = b"\x01\x00\x00\xff\xff"  # an empty stored block, marked last
_STORED_MAX = 0xFFFF  # the most bytes one stored block holds


class Piece(NamedTuple):
    """Where one appended piece landed in its file: `offset` and `length` there, and the CRC-32 and
    length (`size`) of the bytes it decompresses to (for an uncompressed file, the same bytes)."""

    offset: int
    length: int
    crc: int
    size: int


def stored(data: bytes) -> bytes:
    """`data` as deflate stored blocks, none marked last."""
    view = memoryview(data)
    blocks = []
    for start in range(0, len(data), _STORED_MAX):
        block = view[start : start + _STORED_MAX]
        blocks += (struct.pack("<BHH", 0, len(block), len(block) ^ 0xFFFF), block)
    return b"".join(blocks)


def closing(crc: int, size: int) -> bytes:
    """What follows a member's last piece: a last (empty) block, then the trailer."""
    return _LAST_BLOCK + struct.pack("<II", crc, size & 0xFFFFFFFF)


class IncompletePart(Exception):
    """A part holds bytes no writer reported: a process died while appending to it."""


class PieceLedger:
    """The pieces of the file at `path`, folded in file order from `start` (the header's end)
    however they are reported: the CRC-32 and length of everything they decompress to, and how
    many there are."""

    def __init__(self, path: str, start: int):
        self.path = path
        self.end = start
        self.crc = 0
        self.size = 0
        self.pieces = 0
        self._waiting: dict[int, Piece] = {}

    def add(self, piece: Piece) -> None:
        if piece.offset < self.end or piece.offset in self._waiting:
            raise IncompletePart(
                f"{self.path}: two pieces reported at byte {piece.offset}: appends from several processes "
                "did not land whole one after another (a network file system?)"
            )
        self._waiting[piece.offset] = piece
        while self.end in self._waiting:
            folded = self._waiting.pop(self.end)
            self.crc = isal_zlib.crc32_combine(self.crc, folded.crc, folded.size)
            self.size += folded.size
            self.end += folded.length
            self.pieces += 1

    def check_complete(self, file_size: int) -> None:
        """IncompletePart unless the folded pieces cover the file exactly."""
        if self._waiting or self.end != file_size:
            raise IncompletePart(
                f"{self.path} holds {file_size} bytes, but the pieces reported cover only the first {self.end} "
                f"({len(self._waiting)} more after a gap): a converting process died while writing to it"
            )
