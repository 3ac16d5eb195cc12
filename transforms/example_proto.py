"""tf.train.Example bytes without TensorFlow.

Workers must not import TensorFlow (seconds and hundreds of MB per process). The Example schema is tiny, so
we declare the same messages as tensorflow/core/example/{example,feature}.proto in a private
protobuf descriptor pool and let protobuf serialise them: the bytes are identical to
`tf.train.Example(...).SerializeToString(deterministic=True)` (tests check this against TF).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from core.contract.features import source_id
from core.tfrecord_framing import MAX_EXAMPLE_BYTES

if TYPE_CHECKING:
    from transforms.image_check import CheckedImage

Scalar = bytes | str | int | float
FeatureValue = Scalar | Sequence[Scalar]

_TAG_AND_LENGTH = 6  # a field's tag (1 byte in these messages) and a length varint (5 bytes below 2**35)
_MAX_VARINT = 10  # a negative int64


class ExampleTooLarge(ValueError):
    """An Example that could be longer than MAX_EXAMPLE_BYTES (size_bound): its source must be a dead letter."""


_F = descriptor_pb2.FieldDescriptorProto


def _message(file_proto, name, fields, nested=(), oneof=None):
    msg = (
        file_proto.message_type.add(name=name) if file_proto is not None else descriptor_pb2.DescriptorProto(name=name)
    )
    for field_name, number, kind, label, type_name in fields:
        field = msg.field.add(name=field_name, number=number, type=kind, label=label)
        if type_name:
            field.type_name = type_name
        if oneof is not None:
            field.oneof_index = 0
    if oneof is not None:
        msg.oneof_decl.add(name=oneof)
    for nested_msg in nested:
        msg.nested_type.add().CopyFrom(nested_msg)
    return msg


def _example_class():
    fp = descriptor_pb2.FileDescriptorProto(name="transforms/example.proto", package="tensorflow", syntax="proto3")
    rep, opt = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL
    _message(fp, "BytesList", [("value", 1, _F.TYPE_BYTES, rep, None)])
    _message(fp, "FloatList", [("value", 1, _F.TYPE_FLOAT, rep, None)])
    _message(fp, "Int64List", [("value", 1, _F.TYPE_INT64, rep, None)])
    _message(
        fp,
        "Feature",
        [
            ("bytes_list", 1, _F.TYPE_MESSAGE, opt, ".tensorflow.BytesList"),
            ("float_list", 2, _F.TYPE_MESSAGE, opt, ".tensorflow.FloatList"),
            ("int64_list", 3, _F.TYPE_MESSAGE, opt, ".tensorflow.Int64List"),
        ],
        oneof="kind",
    )
    entry = _message(
        None,
        "FeatureEntry",
        [
            ("key", 1, _F.TYPE_STRING, opt, None),
            ("value", 2, _F.TYPE_MESSAGE, opt, ".tensorflow.Feature"),
        ],
    )
    entry.options.map_entry = True
    _message(
        fp, "Features", [("feature", 1, _F.TYPE_MESSAGE, rep, ".tensorflow.Features.FeatureEntry")], nested=[entry]
    )
    _message(fp, "Example", [("features", 1, _F.TYPE_MESSAGE, opt, ".tensorflow.Features")])
    pool = descriptor_pool.DescriptorPool()  # private: no clash with TensorFlow's own tensorflow.Example
    pool.Add(fp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


Example = _example_class()


def encode_example(features: Mapping[str, FeatureValue]) -> bytes:
    """Serialise a feature dict as a tf.train.Example.

    A value's Python type picks the list kind: bytes/str -> bytes_list, int/bool -> int64_list,
    float -> float_list; a scalar is a one-element list. Callers convert values to the declared
    type first (a float column's 3 is 3.0), so a feature's kind never depends on one record.
    ExampleTooLarge when it could be longer than TensorFlow parses (`size_bound`, known without
    serialising: so an Example within a few bytes per value of the limit is refused too).
    """
    size = size_bound(features)
    if size > MAX_EXAMPLE_BYTES:  # checked before serialising, which takes seconds per GiB
        raise ExampleTooLarge(
            f"the Example would be up to {size:,} bytes; TensorFlow parses at most {MAX_EXAMPLE_BYTES:,}"
        )
    example = Example()
    example.features.SetInParent()  # as TensorFlow does: an Example with no features is b"\n\x00"
    feature_map = example.features.feature
    for name, value in features.items():
        values = _listed(value)
        first = values[0]
        if isinstance(first, bytes):
            feature_map[name].bytes_list.value.extend(values)
        elif isinstance(first, str):
            feature_map[name].bytes_list.value.extend(v.encode("utf-8") for v in values)
        elif isinstance(first, int):
            feature_map[name].int64_list.value.extend(map(int, values))  # bools as 0/1
        elif isinstance(first, float):
            feature_map[name].float_list.value.extend(values)
        else:
            raise TypeError(f"feature {name!r}: unsupported value type {type(first).__name__}")
    return example.SerializeToString(deterministic=True)


def size_bound(features: Mapping[str, FeatureValue]) -> int:
    """At least the length of encode_example(features), and at most a few bytes per value more:
    every length is taken as a 5-byte varint and every int as a 10-byte one."""
    size = _TAG_AND_LENGTH  # Example.features
    for name, value in features.items():
        values = _listed(value)
        # Features' map entry, its key, its Feature, the Feature's list, and (numbers) their packing
        size += 5 * _TAG_AND_LENGTH + _utf8_length(name)
        first = values[0]
        if isinstance(first, bytes):
            size += sum(map(len, values)) + _TAG_AND_LENGTH * len(values)
        elif isinstance(first, str):
            size += sum(map(_utf8_length, values)) + _TAG_AND_LENGTH * len(values)
        else:
            size += (4 if isinstance(first, float) else _MAX_VARINT) * len(values)
    return size


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _listed(value: FeatureValue) -> Sequence[Scalar]:
    return value if isinstance(value, (list, tuple)) else (value,)


COLOUR_MODES = {1: "grey", 2: "grey and alpha", 3: "RGB", 4: "RGBA"}  # by the channels TF decodes


def image_facts(keys: Mapping[str, str], image: CheckedImage, label: str) -> dict[str, int | float | str]:
    """What the dataset's statistics take of one image record (transforms.dataset_statistics):
    the stored features they describe, under their feature names (`keys`), the source's full size
    too where the record keeps it (a run that resizes: its stored sizes sit at the bound, so only
    these show what the sources are, and a refresh's drift checks see them change), and what a
    record implies but does not store: its bytes, aspect ratio, colour mode and EXIF orientation."""
    return {
        keys["width"]: image.width,
        keys["height"]: image.height,
        **_original_size(keys, image),
        keys["format"]: image.format,
        keys["text"]: label,
        "image/stored_bytes": len(image.data),
        "image/aspect_ratio": image.width / image.height,
        "image/colour_mode": COLOUR_MODES.get(image.channels, f"{image.channels} channels"),
        "image/exif_orientation": str(image.orientation),  # a kind, counted: 1 (none) to 8
    }


def _original_size(keys: Mapping[str, str], image: CheckedImage) -> dict[str, int]:
    """The source's full size under the original size roles, where `keys` has them."""
    if "original_height" not in keys:
        return {}
    return {
        keys["original_height"]: image.original_height or image.height,
        keys["original_width"]: image.original_width or image.width,
    }


def image_features(
    keys: Mapping[str, str], image: CheckedImage, label_id: int, label: str, uri: str, key: str
) -> dict[str, FeatureValue]:
    """The features of one image source's Example, under the feature names `keys` (config
    image.keys): `label_id` as written (any label offset applied), `key` the source's key, hashed
    into its image/source_id; the source's full size under the original size roles where `keys`
    has them (a run that resizes). ReadImages writes these; the benchmark's floor builds the same
    without Beam."""
    features: dict[str, FeatureValue] = {
        keys["encoded"]: image.data,
        keys["format"]: image.format,
        keys["height"]: image.height,
        keys["width"]: image.width,
        keys["channels"]: image.channels,
        keys["label"]: label_id,
        keys["text"]: label,
        keys["filename"]: uri,
        keys["source_id"]: source_id(key),
    }
    return features | _original_size(keys, image)
