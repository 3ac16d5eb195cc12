"""The models. Every one ends in float32 logits (also under a mixed-precision policy) and is built
from scratch: nothing is downloaded at run time (keras.applications with weights=None).

Image models take uint8 [B, S, S, 3] pixels (what the input pipeline produces) and cast and
rescale them inside the model, on the accelerator; the exported model takes the same input. The
tabular model takes one [B] tensor per column (strings already hashed to int64 buckets by the
input pipeline).
"""

from __future__ import annotations

from collections.abc import Mapping

import keras

from core.contract.manifest import FeatureSpec
from trainer.errors import TrainerError
from trainer.flags import ARCHITECTURES

# The keras.applications class of each --architecture but small_cnn, built with weights=None.
APPLICATIONS = {
    "resnet50": "ResNet50",
    "resnet50v2": "ResNet50V2",
    "mobilenet_v2": "MobileNetV2",
    "mobilenet_v3_small": "MobileNetV3Small",
    "efficientnet_b0": "EfficientNetB0",
    "efficientnetv2_b0": "EfficientNetV2B0",
    "densenet121": "DenseNet121",
}
STRING_EMBEDDING_DIM = 8


class PerImageStandardization(keras.layers.Layer):
    """(x - mean) / max(std, 1) per image over all pixels and channels (as
    tf.image.per_image_standardization): the model sees shapes and textures, not exposure."""

    def call(self, images):
        images = keras.ops.cast(images, self.compute_dtype)
        mean = keras.ops.mean(images, axis=(1, 2, 3), keepdims=True)
        std = keras.ops.std(images, axis=(1, 2, 3), keepdims=True)
        return (images - mean) / keras.ops.maximum(std, 1.0)


def small_cnn(image_size: int, num_classes: int, width: int = 32, blocks: int = 4) -> keras.Model:
    """Per-image standardization, `blocks` conv blocks (conv-BN-ReLU, 2x2 max pooling; filters
    double up to 4 x width), global *max* pooling (an object anywhere in the frame counts fully,
    not diluted by the background around it), dense logits."""
    inputs = keras.Input((image_size, image_size, 3), dtype="uint8", name="image")
    x = PerImageStandardization(name="standardize")(inputs)
    for i in range(blocks):
        x = keras.layers.Conv2D(width * 2 ** min(i, 2), 3, padding="same", use_bias=False, name=f"conv{i}")(x)
        # momentum 0.9: the moving statistics settle within tens of steps, not hundreds
        x = keras.layers.BatchNormalization(momentum=0.9, name=f"bn{i}")(x)
        x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D(2, padding="same")(x)
    x = keras.layers.GlobalMaxPooling2D()(x)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="small_cnn")


def application(name: str, image_size: int, num_classes: int) -> keras.Model:
    """A keras.applications architecture, randomly initialised (weights=None), with its own
    classifier of `num_classes` logits."""
    cls = getattr(keras.applications, APPLICATIONS[name])
    inputs = keras.Input((image_size, image_size, 3), dtype="uint8", name="image")
    x = keras.layers.Rescaling(1.0 / 127.5, offset=-1.0)(inputs)  # cast to the compute dtype, [-1, 1]
    body = cls(weights=None, include_top=False, input_shape=(image_size, image_size, 3), pooling="avg")
    x = body(x)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name=name)


def image_model(architecture: str, image_size: int, num_classes: int) -> keras.Model:
    if architecture == "small_cnn":
        return small_cnn(image_size, num_classes)
    if architecture in APPLICATIONS:
        return application(architecture, image_size, num_classes)
    raise TrainerError(f"unknown --architecture {architecture!r}; choose one of {', '.join(ARCHITECTURES)}")


def tabular_model(
    features: Mapping[str, FeatureSpec], outputs: int, string_buckets: int, hidden: tuple[int, ...] = (64, 32)
) -> keras.Model:
    """Dense network over the columns: numbers batch-normalised (no pass over the data to learn
    their statistics), hashed strings embedded; `outputs` logits (1 for regression)."""
    inputs, numeric, embedded = {}, [], []
    for name, spec in features.items():
        if spec.dtype == "string":
            inputs[name] = keras.Input((), dtype="int64", name=name)
            e = keras.layers.Embedding(string_buckets, STRING_EMBEDDING_DIM, name=f"embed_{_safe(name)}")(inputs[name])
            embedded.append(e)
        else:
            inputs[name] = keras.Input((), dtype=spec.dtype, name=name)
            numeric.append(keras.ops.expand_dims(keras.ops.cast(inputs[name], "float32"), -1))
    parts = []
    if numeric:
        x = numeric[0] if len(numeric) == 1 else keras.layers.Concatenate()(numeric)
        parts.append(keras.layers.BatchNormalization(name="normalize")(x))
    parts += embedded
    x = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
    for i, units in enumerate(hidden):
        x = keras.layers.Dense(units, activation="relu", name=f"dense{i}")(x)
    logits = keras.layers.Dense(outputs, dtype="float32", name="logits")(x)
    if outputs == 1:
        logits = keras.ops.squeeze(logits, -1)
    return keras.Model(inputs, logits, name="tabular_dense")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)
