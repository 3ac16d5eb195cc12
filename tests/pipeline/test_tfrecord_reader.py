"""pipeline.tfrecord_reader against files TensorFlow's own writer made: every payload back, whole,
at the offset TensorFlow framed it, wherever records fall across the reader's chunks; and a file
cut short anywhere names the record it breaks in."""

import os

import pytest
import tensorflow as tf

from pipeline import tfrecord_reader
from pipeline.tfrecord_framing import FRAMING_BYTES
from pipeline.tfrecord_reader import RecordError, read_framed_records

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
    offsets, payloads = zip(*read_framed_records(path, compression), strict=True)
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
            list(read_framed_records(str(cut), "NONE"))
        assert e.value.record == broken, size
