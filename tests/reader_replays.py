"""The decode and crop of readers the docs name, replayed op for op in TensorFlow 2 spelling, so
tests can run them on every record of a converted dataset. Each function cites the reader's file and
function it replays; the readers themselves are not installed here (tensorflow/tpu is not a
package, and Model Garden pins its own TensorFlow).

Each replay takes a record's `image/encoded` and returns the image the reader's model would see,
as the reader computes it inside `tf.data.Dataset.map` (graph mode: `traced` wraps it so)."""

from __future__ import annotations

import tensorflow as tf

# tensorflow/tpu models/official/resnet/resnet_preprocessing.py (commit 61dbdbc1714d)
TPU_IMAGE_SIZE = 224
TPU_CROP_PADDING = 32
# tensorflow/models official/vision/ops/preprocess_ops.py; classification_input.Parser's default
# crop_area_range, and an output size as its ImageNet configs set it.
MG_CENTER_CROP_FRACTION = 0.875
MG_CROP_AREA_RANGE = (0.08, 1.0)
MG_OUTPUT_SIZE = [224, 224]


def traced(replay):
    """`replay` as a graph function of one scalar string, as Dataset.map runs it."""
    return tf.function(replay, input_signature=[tf.TensorSpec([], tf.string)])


# TPU reference ResNet: resnet_preprocessing.py, preprocess_for_eval and preprocess_for_train.


def tpu_center_crop(image_bytes, image_size=TPU_IMAGE_SIZE):
    """resnet_preprocessing.py `_decode_and_center_crop`."""
    shape = tf.image.extract_jpeg_shape(image_bytes)
    image_height = shape[0]
    image_width = shape[1]
    padded_center_crop_size = tf.cast(
        ((image_size / (image_size + TPU_CROP_PADDING)) * tf.cast(tf.minimum(image_height, image_width), tf.float32)),
        tf.int32,
    )
    offset_height = ((image_height - padded_center_crop_size) + 1) // 2
    offset_width = ((image_width - padded_center_crop_size) + 1) // 2
    crop_window = tf.stack([offset_height, offset_width, padded_center_crop_size, padded_center_crop_size])
    image = tf.image.decode_and_crop_jpeg(image_bytes, crop_window, channels=3)
    return tf.compat.v1.image.resize_bicubic([image], [image_size, image_size])[0]


def tpu_random_crop(image_bytes, image_size=TPU_IMAGE_SIZE):
    """resnet_preprocessing.py `_decode_and_random_crop`, with its `distorted_bounding_box_crop`
    and `_at_least_x_are_equal` inlined: a distorted box, or the center crop when the box is the
    whole image (what sample_distorted_bounding_box returns after 10 failed attempts)."""
    bbox = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
    shape = tf.image.extract_jpeg_shape(image_bytes)
    bbox_begin, bbox_size, _ = tf.image.sample_distorted_bounding_box(
        shape,
        bounding_boxes=bbox,
        min_object_covered=0.1,
        aspect_ratio_range=(3.0 / 4, 4.0 / 3.0),
        area_range=(0.08, 1.0),
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    offset_y, offset_x, _ = tf.unstack(bbox_begin)
    target_height, target_width, _ = tf.unstack(bbox_size)
    crop_window = tf.stack([offset_y, offset_x, target_height, target_width])
    image = tf.image.decode_and_crop_jpeg(image_bytes, crop_window, channels=3)
    original_shape = tf.image.extract_jpeg_shape(image_bytes)
    bad = tf.greater_equal(tf.reduce_sum(tf.cast(tf.equal(original_shape, tf.shape(image)), tf.int32)), 3)
    return tf.cond(
        bad,
        lambda: tpu_center_crop(image_bytes, image_size),
        lambda: tf.compat.v1.image.resize_bicubic([image], [image_size, image_size])[0],
    )


# Model Garden classification: official/vision/ops/preprocess_ops.py (commit 0ca414d5209e) and
# official/vision/dataloaders/classification_input.py (commit 00b830c7ca64), Parser.


def mg_center_crop_image(image, center_crop_fraction=MG_CENTER_CROP_FRACTION):
    """preprocess_ops.py `center_crop_image`."""
    image_size = tf.cast(tf.shape(image)[:2], dtype=tf.float32)
    crop_size = center_crop_fraction * tf.math.minimum(image_size[0], image_size[1])
    crop_offset = tf.cast((image_size - crop_size) / 2.0, dtype=tf.int32)
    crop_size = tf.cast(crop_size, dtype=tf.int32)
    return image[crop_offset[0] : crop_offset[0] + crop_size, crop_offset[1] : crop_offset[1] + crop_size, :]


def mg_center_crop_image_v2(image_bytes, image_shape, center_crop_fraction=MG_CENTER_CROP_FRACTION):
    """preprocess_ops.py `center_crop_image_v2`."""
    image_shape = tf.cast(image_shape, tf.float32)
    crop_size = center_crop_fraction * tf.math.minimum(image_shape[0], image_shape[1])
    crop_offset = tf.cast((image_shape - crop_size) / 2.0, dtype=tf.int32)
    crop_size = tf.cast(crop_size, dtype=tf.int32)
    crop_window = tf.stack([crop_offset[0], crop_offset[1], crop_size, crop_size])
    return tf.image.decode_and_crop_jpeg(image_bytes, crop_window, channels=3)


def _mg_distorted_box(image_shape, area_range):
    """The sample_distorted_bounding_box call `random_crop_image` and `random_crop_image_v2` share."""
    return tf.image.sample_distorted_bounding_box(
        image_shape,
        tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4]),
        seed=1,
        min_object_covered=area_range[0],
        aspect_ratio_range=(3.0 / 4.0, 4.0 / 3.0),
        area_range=area_range,
        max_attempts=10,
    )


def mg_random_crop_image(image, area_range=MG_CROP_AREA_RANGE):
    """preprocess_ops.py `random_crop_image`."""
    crop_offset, crop_size, _ = _mg_distorted_box(tf.shape(image), area_range)
    return tf.slice(image, crop_offset, crop_size)


def mg_random_crop_image_v2(image_bytes, image_shape, area_range=MG_CROP_AREA_RANGE):
    """preprocess_ops.py `random_crop_image_v2`."""
    crop_offset, crop_size, _ = _mg_distorted_box(image_shape, area_range)
    offset_y, offset_x, _ = tf.unstack(crop_offset)
    crop_height, crop_width, _ = tf.unstack(crop_size)
    crop_window = tf.stack([offset_y, offset_x, crop_height, crop_width])
    return tf.image.decode_and_crop_jpeg(image_bytes, crop_window, channels=3)


def mg_train_image(image_bytes, decode_jpeg_only: bool):
    """classification_input.py `Parser._parse_train_image` (aug_crop on, its default) up to its
    resize; what follows (flip, augmentation, normalisation) keeps the shape."""
    if decode_jpeg_only:
        image_shape = tf.image.extract_jpeg_shape(image_bytes)
        cropped_image = mg_random_crop_image_v2(image_bytes, image_shape)
        image = tf.cond(
            tf.reduce_all(tf.equal(tf.shape(cropped_image), image_shape)),
            lambda: mg_center_crop_image_v2(image_bytes, image_shape),
            lambda: cropped_image,
        )
    else:
        image = tf.io.decode_image(image_bytes, channels=3)
        image.set_shape([None, None, 3])
        cropped_image = mg_random_crop_image(image)
        image = tf.cond(
            tf.reduce_all(tf.equal(tf.shape(cropped_image), tf.shape(image))),
            lambda: mg_center_crop_image(image),
            lambda: cropped_image,
        )
    image = tf.image.resize(image, MG_OUTPUT_SIZE, method="bilinear")
    image.set_shape([MG_OUTPUT_SIZE[0], MG_OUTPUT_SIZE[1], 3])
    return image


def mg_eval_image(image_bytes, decode_jpeg_only: bool):
    """classification_input.py `Parser._parse_eval_image` (aug_crop on) up to its resize."""
    if decode_jpeg_only:
        image_shape = tf.image.extract_jpeg_shape(image_bytes)
        image = mg_center_crop_image_v2(image_bytes, image_shape)
    else:
        image = tf.io.decode_image(image_bytes, channels=3)
        image.set_shape([None, None, 3])
        image = mg_center_crop_image(image)
    image = tf.image.resize(image, MG_OUTPUT_SIZE, method="bilinear")
    image.set_shape([MG_OUTPUT_SIZE[0], MG_OUTPUT_SIZE[1], 3])
    return image


def mg_detection_image(image_bytes):
    """official/vision/dataloaders/tf_example_decoder.py `TfExampleDecoder._decode_image`."""
    image = tf.io.decode_image(image_bytes, channels=3)
    image.set_shape([None, None, 3])
    return image


# The training and evaluation input of each reader, by the name a failure is reported under; each
# returns the 224x224x3 image its model takes.
TPU_RESNET = {
    "TPU ResNet eval (_decode_and_center_crop)": tpu_center_crop,
    "TPU ResNet train (_decode_and_random_crop)": tpu_random_crop,
}
MODEL_GARDEN = {
    "Model Garden eval, decode_jpeg_only": lambda b: mg_eval_image(b, True),
    "Model Garden train, decode_jpeg_only": lambda b: mg_train_image(b, True),
    "Model Garden eval, decode_image": lambda b: mg_eval_image(b, False),
    "Model Garden train, decode_image": lambda b: mg_train_image(b, False),
}
