"""The Example bytes must be exactly what TensorFlow produces, and parse in TensorFlow."""

import numpy as np
import pytest
import tensorflow as tf

from transforms.example_proto import encode_example


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


def test_unsupported_type_names_the_feature():
    with pytest.raises(TypeError, match="'bad'"):
        encode_example({"bad": object()})
