"""Feature keys of image Examples, and the `tf.io.parse_example` spec a reader builds from a
manifest's feature spec.

TensorFlow stays out of this package: `parse_spec` takes the caller's `tf` module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from core.contract.manifest import FeatureSpec

# Feature roles and their default keys: the ones the TPU reference readers use. Users may rename
# them (config `image.keys`); the manifest records the keys a dataset has.
DEFAULT_IMAGE_KEYS = {
    "encoded": "image/encoded",
    "format": "image/format",
    "height": "image/height",
    "width": "image/width",
    "channels": "image/channels",
    "label": "image/class/label",
    "text": "image/class/text",
    "filename": "image/filename",
    # A decimal integer string (transforms.images.source_id): Model Garden's detection decoder
    # requires the key, and its parsers read the value as an int64 (utils.process_source_id).
    "source_id": "image/source_id",
}
# Where sources are stored scaled down (config image.resize), each record also keeps its source's
# full size, turned as the stored image is: stored / original is the scale a reader applies to
# coordinates on the original (boxes, points).
ORIGINAL_SIZE_KEYS = {"original_height": "image/original/height", "original_width": "image/original/width"}
# The dtype of each role, for the manifest's feature spec.
IMAGE_KEY_DTYPES = {
    "original_height": "int64",
    "original_width": "int64",
    "encoded": "string",
    "format": "string",
    "height": "int64",
    "width": "int64",
    "channels": "int64",
    "label": "int64",
    "text": "string",
    "filename": "string",
    "source_id": "string",
}
# What an optional feature reads as where a record lacks it, with `fill_missing`.
MISSING_VALUES = {"string": b"", "int64": 0, "float32": 0.0}


def _filled(shape: tuple[int, ...], value: Any) -> Any:
    """A nested list of `shape` holding `value` (the value itself for a scalar)."""
    return value if not shape else [_filled(shape[1:], value) for _ in range(shape[0])]


def parse_spec(features: Iterable[FeatureSpec], tf, *, fill_missing: bool = False) -> dict:
    """{key: tf.io feature} for `tf.io.parse_example`. A required feature is a FixedLenFeature; an
    optional one is a VarLenFeature (absent where a record lacks it), or with `fill_missing` a
    FixedLenFeature defaulting to MISSING_VALUES (dense batches, as a model wants them)."""
    spec = {}
    for feature in features:
        dtype = tf.as_dtype(feature.dtype)
        if feature.required:
            spec[feature.name] = tf.io.FixedLenFeature(list(feature.shape), dtype)
        elif fill_missing:
            default = _filled(feature.shape, MISSING_VALUES[feature.dtype])
            spec[feature.name] = tf.io.FixedLenFeature(list(feature.shape), dtype, default_value=default)
        else:
            spec[feature.name] = tf.io.VarLenFeature(dtype)
    return spec


def source_id(key: str) -> str:
    """`image/source_id` of the source with this key (its path below the input, or its URI as the
    CSV wrote it): stable across reruns and bucket moves, and a decimal integer below 2**53, since
    Model Garden's parsers read it with tf.strings.to_number(int64) and COCO tools, JSON and float64
    carry such ids exactly."""
    return str(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") >> 11)
