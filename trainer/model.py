"""The models. Every one ends in float32 logits (also under a mixed-precision policy) and is built
from scratch: nothing is downloaded at run time (keras.applications with weights=None).

Image models take uint8 [B, S, S, 3] pixels (what the input pipeline produces) and cast and
rescale them inside the model, on the accelerator; the exported model takes the same input. The
tabular model takes one [B] tensor per column (strings already hashed to int64 buckets by the
input pipeline) and standardises its number columns with statistics of the training data
(Standardization), so that its evaluation sees the inputs its training saw from the first step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


class Standardization(keras.layers.Layer):
    """(x - mean) / sqrt(variance) per column of [B, N] inputs, with the mean and variance of the
    training data (trainer.data_statistics) held as non-trainable weights: they are in every checkpoint
    and export, so a resumed run standardises as the run that began it, whatever the data holds by
    then. A column whose variance is 0 is only centred.

    Not BatchNormalization, whose moving averages learn the statistics from batches as it trains:
    on a short run they lag far behind, and evaluation (which uses them) sees other inputs than
    training did. Not keras.layers.Normalization either: once adapted it works from copies of its
    weights, which a checkpoint restored later leaves as they were; this layer reads its weights at
    every call. Computed in float32 (also under a mixed-precision policy): a column's values can be
    far larger than its spread."""

    def __init__(self, mean: Sequence[float] | None = None, variance: Sequence[float] | None = None, **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})
        self._statistics = (mean, variance)

    def build(self, input_shape):
        columns = input_shape[-1]
        mean, variance = self._statistics
        for given in (mean, variance):
            if given is not None and len(given) != columns:
                raise ValueError(f"{len(given)} statistics for {columns} columns")
        initial = {"mean": (mean, "zeros"), "variance": (variance, "ones")}
        for name, (values, default) in initial.items():
            initializer = keras.initializers.Constant(list(values)) if values is not None else default
            setattr(self, name, self.add_weight(name=name, shape=(columns,), initializer=initializer, trainable=False))

    def call(self, inputs):
        inputs = keras.ops.cast(inputs, self.compute_dtype)
        spread = keras.ops.sqrt(keras.ops.where(self.variance > 0, self.variance, keras.ops.ones_like(self.variance)))
        return (inputs - self.mean) / spread

    def get_config(self):
        mean, variance = self._statistics
        return {
            **super().get_config(),
            "mean": None if mean is None else list(mean),
            "variance": None if variance is None else list(variance),
        }


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
    features: Mapping[str, FeatureSpec],
    outputs: int,
    string_buckets: int,
    hidden: tuple[int, ...] = (64, 32),
    statistics: tuple[Sequence[float], Sequence[float]] | None = None,
) -> keras.Model:
    """Dense network over the columns: numbers standardised (Standardization; `statistics`: the
    (mean, variance) of each number column, in the order of `features`, from trainer.data_statistics;
    None for a model whose weights a checkpoint restores), hashed strings embedded; `outputs`
    logits (1 for regression)."""
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
        # float32 up to the standardization, under any policy (see Standardization)
        x = numeric[0] if len(numeric) == 1 else keras.layers.Concatenate(dtype="float32")(numeric)
        mean, variance = statistics or (None, None)
        parts.append(Standardization(mean, variance, name="normalize")(x))
    parts += embedded
    x = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
    for i, units in enumerate(hidden):
        x = keras.layers.Dense(units, activation="relu", name=f"dense{i}")(x)
    logits = keras.layers.Dense(outputs, dtype="float32", name="logits")(x)
    if outputs == 1:
        logits = keras.ops.squeeze(logits, -1)
    return keras.Model(inputs, logits, name="tabular_dense")


def numeric_columns(features: Mapping[str, FeatureSpec]) -> list[str]:
    """The columns tabular_model standardises, in its order."""
    return [name for name, spec in features.items() if spec.dtype != "string"]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)
