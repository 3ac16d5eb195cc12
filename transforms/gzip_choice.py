"""Which deflate a GZIP stream gets: stored blocks for data that does not compress, ISA-L for data
that does.

Image payloads are already compressed: Huffman coding them saves well under 1% of the bytes, yet
every reader pays to undo it, the job's read-back and each training epoch alike (stored blocks
inflate at memory speed). ISA-L's igzip (python-isal's `isal_zlib`) deflates what does compress
at a fraction of the stdlib zlib's CPU. No Beam here: the benchmark's floor writes through it too.
"""

from __future__ import annotations

import types
import zlib

from isal import isal_zlib

SAMPLE_BYTES = 1 << 20  # what a stream's choice is made on (the whole stream, if shorter)
MIN_SAVING = 0.05  # the share of the sample ISA-L must save for the stream to be compressed
STORED = 0  # zlib's level that writes stored blocks only


def worth_compressing(sample: bytes, level: int = isal_zlib.Z_DEFAULT_COMPRESSION) -> bool:
    """Whether ISA-L deflate at `level` saves at least MIN_SAVING of `sample`."""
    return len(isal_zlib.compress(sample, level)) <= (1 - MIN_SAVING) * len(sample)


class ChoosingCompressor:
    """A zlib compressobj that holds back its first SAMPLE_BYTES, then writes the whole stream
    through ISA-L or as stored blocks (worth_compressing). Same calls as zlib's: compress, flush."""

    def __init__(self, level: int = isal_zlib.Z_DEFAULT_COMPRESSION, method: int = zlib.DEFLATED, wbits: int = 15):
        self._level, self._method, self._wbits = level, method, wbits
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._compressor = None
        self.stored: bool | None = None  # None until chosen

    def _choose(self) -> bytes:
        sample = b"".join(self._held)
        self._held = []
        self.stored = not worth_compressing(sample[:SAMPLE_BYTES], self._level)
        if self.stored:
            self._compressor = zlib.compressobj(STORED, self._method, self._wbits)
        else:
            self._compressor = isal_zlib.compressobj(self._level, self._method, self._wbits)
        return self._compressor.compress(sample)

    def compress(self, data: bytes) -> bytes:
        if self._compressor is not None:
            return self._compressor.compress(data)
        self._held.append(bytes(data))
        self._held_bytes += len(data)
        return self._choose() if self._held_bytes >= SAMPLE_BYTES else b""

    def flush(self, mode: int = zlib.Z_FINISH) -> bytes:
        head = self._choose() if self._compressor is None else b""
        return head + self._compressor.flush(mode)


# What Beam's filesystem module calls `zlib`: its constants, ChoosingCompressor for writes, ISA-L
# for reads.
CODEC = types.SimpleNamespace(
    MAX_WBITS=zlib.MAX_WBITS,
    DEFLATED=zlib.DEFLATED,
    Z_DEFAULT_COMPRESSION=isal_zlib.Z_DEFAULT_COMPRESSION,  # ISA-L's levels are 0-3
    Z_FINISH=zlib.Z_FINISH,
    Z_SYNC_FLUSH=zlib.Z_SYNC_FLUSH,
    error=isal_zlib.error,
    compressobj=ChoosingCompressor,
    decompressobj=isal_zlib.decompressobj,
    __name__=__name__ + ".CODEC",
)
