"""pipeline.tfrecord_reader against files TensorFlow's own writer made: every payload back, whole,
at the offset TensorFlow framed it, wherever records fall across the reader's chunks; and a file
cut short anywhere names the record it breaks in."""

import gzip
import itertools
import os

import pytest
import tensorflow as tf

from core.tfrecord_framing import FRAMING_BYTES
from pipeline import tfrecord_reader
from pipeline.tfrecord_reader import RecordError, read_framed_records, read_records

CHUNK = 64  # the reader's chunk size in these tests, so records start, end and span across chunks
PAYLOADS = [b"", b"a", os.urandom(CHUNK - FRAMING_BYTES), os.urandom(CHUNK), os.urandom(5 * CHUNK + 7), b"z" * 300]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(tfrecord_reader, "CHUNK_BYTES", CHUNK)


def write_with_tensorflow(path, compression):
    options = tf.io.TFRecordOptions(compression_type="GZIP" if compression == "GZIP" else "")
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for payload in PAYLOADS:
            writer.write(payload)
    return str(path)


@pytest.mark.parametrize("compression", ["GZIP", "NONE"])
def test_every_payload_comes_back_at_its_offset(tmp_path, compression):
    path = write_with_tensorflow(tmp_path / "shard", compression)
    offsets, payloads = zip(*read_framed_records(path, compression, inside=None), strict=True)
    assert list(payloads) == PAYLOADS
    framed_sizes = [len(p) + FRAMING_BYTES for p in PAYLOADS]
    assert list(offsets) == [sum(framed_sizes[:i]) for i in range(len(PAYLOADS))]


def test_a_file_cut_anywhere_names_the_record_it_breaks_in(tmp_path):
    with open(write_with_tensorflow(tmp_path / "whole", "NONE"), "rb") as f:
        whole = f.read()
    ends = [sum(len(p) + FRAMING_BYTES for p in PAYLOADS[: i + 1]) for i in range(len(PAYLOADS))]
    cut = tmp_path / "cut"
    for size in range(1, len(whole)):
        if size in ends:
            continue  # a cut between records leaves a shorter, valid file
        cut.write_bytes(whole[:size])
        broken = next(i for i, end in enumerate(ends) if size < end)
        with pytest.raises(RecordError, match="truncated") as e:
            list(read_framed_records(str(cut), "NONE", inside=None))
        assert e.value.record == broken, size


def gzip_members(tmp_path, cuts):
    """The PAYLOADS framed by TensorFlow, cut at `cuts` (offsets in the framed bytes) into pieces,
    each its own GZIP member (stored or deflated by turns), as transforms.gzip_pieces appends them:
    the file, and the compressed offset where each member ends."""
    with open(write_with_tensorflow(tmp_path / "framed", "NONE"), "rb") as f:
        framed = f.read()
    bounds = [0, *cuts, len(framed)]
    pieces = [framed[a:b] for a, b in itertools.pairwise(bounds)]
    members = [gzip.compress(piece, compresslevel=i % 2 * 6) for i, piece in enumerate(pieces)]
    path = tmp_path / "members.gz"
    path.write_bytes(b"".join(members))
    return str(path), [sum(map(len, members[: i + 1])) for i in range(len(members))]


RECORD_ENDS = [sum(len(p) + FRAMING_BYTES for p in PAYLOADS[: i + 1]) for i in range(len(PAYLOADS))]
# Member boundaries inside a header, inside a payload, between records, and a member of one byte.
CUTS = [5, RECORD_ENDS[1], RECORD_ENDS[2] + 30, RECORD_ENDS[2] + 31, RECORD_ENDS[4] - 2]


def test_gzip_members_may_end_anywhere_in_a_record(tmp_path):
    path, _ = gzip_members(tmp_path, CUTS)
    offsets, payloads = zip(*read_framed_records(path, "GZIP", inside=None), strict=True)
    assert list(payloads) == PAYLOADS
    assert list(offsets) == [0, *RECORD_ENDS[:-1]]


def test_a_gzip_file_cut_anywhere_is_refused_or_ends_at_a_record(tmp_path):
    path, member_ends = gzip_members(tmp_path, CUTS)
    with open(path, "rb") as f:
        whole = f.read()
    framed_ends = [*CUTS, RECORD_ENDS[-1]]  # where each member ends in the framed bytes
    cut = tmp_path / "cut.gz"
    for size in range(1, len(whole)):
        cut.write_bytes(whole[:size])
        members = sum(end <= size for end in member_ends)  # whole members left
        kept = framed_ends[members - 1] if members else 0
        if size in member_ends and kept in RECORD_ENDS:  # a shorter, valid file
            assert list(read_records(str(cut), "GZIP", inside=None)) == PAYLOADS[: RECORD_ENDS.index(kept) + 1], size
            continue
        with pytest.raises(RecordError, match="truncated|ends early") as e:
            list(read_records(str(cut), "GZIP", inside=None))
        # The record being read where the readable bytes end: after the whole members, and at most
        # the rest of the member cut short (whose bytes may come out before its end is missed).
        first = sum(end <= kept for end in RECORD_ENDS)
        last = sum(end <= framed_ends[min(members, len(framed_ends) - 1)] for end in RECORD_ENDS)
        assert first <= e.value.record <= last, size


@pytest.mark.parametrize("where", ["deflated data", "a member's CRC", "a member's length"])
def test_corrupt_gzip_data_is_refused(tmp_path, where):
    path, member_ends = gzip_members(tmp_path, CUTS)
    data = bytearray(open(path, "rb").read())
    end = member_ends[-1]  # the last member: deflated or stored, its data, CRC-32 and length at its end
    data[{"deflated data": end - 10, "a member's CRC": end - 6, "a member's length": end - 2}[where]] ^= 0x40
    broken = tmp_path / "broken.gz"
    broken.write_bytes(bytes(data))
    read = []
    with pytest.raises(RecordError) as e:
        read.extend(read_records(str(broken), "GZIP", inside=None))
    # Every record read before the error is whole; the error names the first record the corrupt
    # member breaks: the one it ends, the last, or one after it (flipped deflated bits can read as
    # more bytes).
    assert read == PAYLOADS[: len(read)] and len(read) >= len(PAYLOADS) - 2
    assert e.value.record == len(read) >= len(PAYLOADS) - 2
