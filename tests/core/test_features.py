"""Parse specs built from a manifest's feature spec, applied by TensorFlow to real Example bytes."""

import tensorflow as tf

from core.contract.features import parse_spec
from core.contract.manifest import FeatureSpec
from transforms.example_proto import encode_example

FEATURES = [
    FeatureSpec("id", "int64"),
    FeatureSpec("score", "float32", required=False),
    FeatureSpec("name", "string", required=False),
]
# One record with every feature, one that lacks the optional ones.
RECORDS = [encode_example({"id": 1, "score": 0.5, "name": b"a"}), encode_example({"id": 2})]


def test_optional_features_are_absent_where_a_record_lacks_them():
    parsed = tf.io.parse_example(RECORDS, parse_spec(FEATURES, tf))
    assert parsed["id"].numpy().tolist() == [1, 2]
    assert isinstance(parsed["score"], tf.sparse.SparseTensor)
    assert parsed["score"].indices.numpy().tolist() == [[0, 0]] and parsed["name"].values.numpy().tolist() == [b"a"]


def test_fill_missing_gives_dense_batches_with_the_missing_values():
    parsed = tf.io.parse_example(RECORDS, parse_spec(FEATURES, tf, fill_missing=True))
    assert parsed["score"].numpy().tolist() == [0.5, 0.0]
    assert parsed["name"].numpy().tolist() == [b"a", b""]


def test_shaped_features_get_a_default_of_their_shape():
    spec = parse_spec([FeatureSpec("xy", "float32", (2,), required=False)], tf, fill_missing=True)
    parsed = tf.io.parse_example([encode_example({"xy": [1.0, 2.0]}), encode_example({})], spec)
    assert parsed["xy"].numpy().tolist() == [[1.0, 2.0], [0.0, 0.0]]
