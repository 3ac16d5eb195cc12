"""transforms.gzip_pieces: stored pieces appended in any order, by any writer, fold into one GZIP
member that the standard library's gzip and zlib, ISA-L and TensorFlow all read back exactly."""

from __future__ import annotations

import gzip
import os
import random
import zlib

import pytest
import tensorflow as tf
from isal import isal_zlib

from core.tfrecord_framing import framed
from transforms.gzip_pieces import HEADER, IncompletePart, Piece, PieceLedger, closing, stored


def _payloads(compressible: bool, count: int = 40) -> list[bytes]:
    rng = random.Random(7)
    if compressible:  # text-like: deflate saves well over 5%
        words = [b"cat", b"dog", b"image/encoded", b"label", b"\x00" * 8]
        return [b" ".join(rng.choice(words) for _ in range(rng.randrange(1, 30_000))) for _ in range(count)]
    # incompressible, some larger than one stored block (65,535 bytes)
    return [os.urandom(rng.choice([1, 17, 65_535, 65_536, 200_000])) for _ in range(count)]


def _member(pieces: list[tuple[bytes, bytes]], order: list[int]) -> tuple[bytes, PieceLedger]:
    """A member of `pieces` ((uncompressed, piece) pairs) appended in `order`, each reported in a
    shuffled order, as processes would."""
    body, reported = bytearray(HEADER), []
    for i in order:
        data, piece = pieces[i]
        reported.append(Piece(len(body), len(piece), isal_zlib.crc32(data), len(data)))
        body += piece
    ledger = PieceLedger("member", len(HEADER))
    random.Random(3).shuffle(reported)
    for piece in reported:
        ledger.add(piece)
    ledger.check_complete(len(body))
    return bytes(body) + closing(ledger.crc, ledger.size), ledger


@pytest.mark.parametrize("compressible", [False, True])
def test_pieces_in_any_order_make_one_member_every_reader_reads(compressible):
    datas = _payloads(compressible)
    pieces = [(data, stored(data)) for data in datas]
    order = list(range(len(pieces)))
    random.Random(5).shuffle(order)
    member, ledger = _member(pieces, order)
    expected = b"".join(datas[i] for i in order)

    assert ledger.pieces == len(datas) and ledger.size == len(expected)
    assert gzip.decompress(member) == expected
    assert zlib.decompress(member, zlib.MAX_WBITS | 16) == expected
    assert isal_zlib.decompress(member, isal_zlib.MAX_WBITS | 16) == expected
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
    assert inflate.decompress(member) == expected and inflate.eof and not inflate.unused_data


def test_a_member_without_pieces_is_an_empty_gzip_stream():
    assert gzip.decompress(HEADER + closing(0, 0)) == b""


def test_tensorflow_reads_records_from_pieces(tmp_path):
    records = _payloads(False, 10) + _payloads(True, 10)
    pieces = [(data, stored(data)) for data in (b"".join(framed(r)) for r in records)]
    member, _ = _member(pieces, list(range(len(pieces))))
    path = tmp_path / "shard.tfrecord.gz"
    path.write_bytes(member)
    assert list(tf.data.TFRecordDataset(str(path), compression_type="GZIP").as_numpy_iterator()) == records


def test_bytes_nobody_reported_make_the_part_incomplete():
    ledger = PieceLedger("part", len(HEADER))
    ledger.add(Piece(len(HEADER), 100, 0, 100))
    ledger.add(Piece(len(HEADER) + 150, 50, 0, 50))  # after a 50-byte gap
    with pytest.raises(IncompletePart, match=r"first 110 \(1 more after a gap\)"):
        ledger.check_complete(len(HEADER) + 200)
    whole = PieceLedger("part", len(HEADER))
    whole.add(Piece(len(HEADER), 100, 0, 100))
    with pytest.raises(IncompletePart, match="holds 120 bytes"):
        whole.check_complete(len(HEADER) + 110)  # bytes past the last piece
    whole.check_complete(len(HEADER) + 100)


@pytest.mark.parametrize("offset", [len(HEADER), len(HEADER) + 40, len(HEADER) + 200])
def test_pieces_reported_over_one_another_are_refused(offset):
    """As appends that do not land whole one after another leave them: one piece written over another."""
    ledger = PieceLedger("part", len(HEADER))
    ledger.add(Piece(len(HEADER), 100, 0, 100))
    ledger.add(Piece(len(HEADER) + 200, 50, 0, 50))
    with pytest.raises(IncompletePart, match=f"two pieces reported at byte {offset}"):
        ledger.add(Piece(offset, 30, 0, 30))
