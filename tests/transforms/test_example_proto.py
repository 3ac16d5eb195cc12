"""The Example bytes must be exactly what TensorFlow produces, and parse in TensorFlow."""

import struct
import subprocess
import sys

import google_crc32c
import numpy as np
import pytest
import tensorflow as tf

from core.tfrecord_framing import MAX_EXAMPLE_BYTES, masked, masked_crc32c
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from transforms.example_proto import encode_example, size_bound


def tf_example(features):
    def feature(value):
        values = value if isinstance(value, (list, tuple)) else [value]
        if isinstance(values[0], (bytes, str)):
            return tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[v.encode() if isinstance(v, str) else v for v in values])
            )
        if isinstance(values[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    return tf.train.Example(features=tf.train.Features(feature={k: feature(v) for k, v in features.items()}))


CASES = [
    {"image/encoded": b"\xff\xd8\x00binary\x00", "image/height": 480, "image/width": 640, "image/class/text": "chat é"},
    {"neg": -1, "big": 2**63 - 1, "small": -(2**63), "zero": 0, "bool": True},
    {"f": 0.1, "many": [1.5, -2.25, 3e38], "nan": float("nan"), "ints": [1, 2, 3]},
    {"empty_bytes": b"", "list": [b"a", b"bc"]},
    {},
]


@pytest.mark.parametrize("features", CASES)
def test_bytes_identical_to_tensorflow(features):
    assert encode_example(features) == tf_example(features).SerializeToString(deterministic=True)


def test_parses_with_tf_parse_example():
    data = encode_example({"a": b"xyz", "n": [4, 5], "x": 2.5})
    parsed = tf.io.parse_single_example(
        data,
        {
            "a": tf.io.FixedLenFeature([], tf.string),
            "n": tf.io.FixedLenFeature([2], tf.int64),
            "x": tf.io.FixedLenFeature([], tf.float32),
        },
    )
    assert parsed["a"].numpy() == b"xyz"
    assert parsed["n"].numpy().tolist() == [4, 5]
    assert np.isclose(parsed["x"].numpy(), 2.5)


@pytest.mark.parametrize(
    "features",
    [
        *CASES,
        {"negative": [-1] * 1000, "floats": [0.5] * 300, "é-key " * 20: "é" * 500},
        {f"column {i}": str(i) for i in range(200)},
        {"big": bytes(1 << 21)},
    ],
)
def test_the_size_bound_is_at_least_the_size_and_close_to_it(features):
    size = len(encode_example(features))
    values = sum(len(v) if isinstance(v, list | tuple) else 1 for v in features.values())
    assert size <= size_bound(features) <= size + 6 + 30 * len(features) + 10 * values


def test_unsupported_type_names_the_feature():
    with pytest.raises(TypeError, match="'bad'"):
        encode_example({"bad": object()})


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out) + bytes([n])


def _example_head(payload: int) -> bytes:
    """The bytes of Example {features {feature {key: "a" value {bytes_list {value: <payload>}}}}}
    that come before its payload, so that a huge one can be written without holding it."""
    head = b""
    for tag, extra in ((b"\n", b""), (b"\n", b""), (b"\x12", b"\n\x01a"), (b"\n", b""), (b"\n", b"")):
        size = len(head) + payload  # of the message so far, nested in the next one out
        head = extra + tag + _varint(size) + head
    return head


def _write_one_zeros_record(path, size: int) -> None:
    """A TFRecord file holding one Example of exactly `size` bytes, its payload zeros."""
    head = _example_head(0)
    for _ in range(3):  # the varints grow with the payload: settle them
        head = _example_head(size - len(head))
    assert len(head) + (size - len(head)) == size
    left = size - len(head)
    zeros = bytes(1 << 26)
    chunks = [zeros] * (left // len(zeros)) + [zeros[: left % len(zeros)]]
    crc = google_crc32c.Checksum(head)
    for chunk in chunks:
        crc.update(chunk)
    length = struct.pack("<Q", size)
    with open(path, "wb") as f:
        f.write(length + struct.pack("<I", masked_crc32c(length)) + head)
        f.writelines(chunks)
        f.write(struct.pack("<I", masked(int.from_bytes(crc.digest(), "big"))))


def test_the_record_writer_of_the_next_test_writes_what_tensorflow_writes(tmp_path):
    path = tmp_path / "one.tfrecord"
    _write_one_zeros_record(path, 300)
    expected = encode_example({"a": bytes(300 - len(_example_head(300)))})
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == [expected]
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        writer.write(expected)
    assert path.read_bytes() == (tmp_path / "tf.tfrecord").read_bytes()


# Parses each file with TensorFlow; at 2**31 bytes TF 2.21's parser crashes the process, so each
# file reports before the next is tried.
_PARSE = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf

spec = {"a": tf.io.FixedLenFeature([], tf.string)}
for path in sys.argv[1:]:
    try:
        for record in tf.data.TFRecordDataset(path):
            payload = tf.io.parse_single_example(record, spec)["a"]
            print(tf.strings.length(record).numpy(), tf.strings.length(payload).numpy(), flush=True)
    except tf.errors.InvalidArgumentError:
        print("not parsed", flush=True)
"""


def test_the_limit_is_the_largest_example_tensorflow_parses(tmp_path):
    """Pins MAX_EXAMPLE_BYTES to TensorFlow: it parses an Example of that size and not one byte
    more. Slow (two records of 2 GiB), but the limit must move if TensorFlow's does."""
    paths = [tmp_path / "largest.tfrecord", tmp_path / "over.tfrecord"]
    try:
        for path, size in zip(paths, (MAX_EXAMPLE_BYTES, MAX_EXAMPLE_BYTES + 1), strict=True):
            _write_one_zeros_record(path, size)
        result = subprocess.run(
            [sys.executable, "-c", _PARSE, *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
            check=False,
        )
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    lines = result.stdout.splitlines()
    payload = MAX_EXAMPLE_BYTES - len(_example_head(MAX_EXAMPLE_BYTES))
    assert lines[:1] == [f"{MAX_EXAMPLE_BYTES} {payload}"], result.stderr[-2000:]
    assert result.returncode != 0 or lines[1:] == ["not parsed"], result.stdout
