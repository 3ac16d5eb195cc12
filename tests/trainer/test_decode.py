"""The image decode + augmentation path of the trainer's input (trainer.input_fn.preprocess_image):
static shapes, every record of every format, labels aligned with their images, and reduced-scale
JPEG decoding against a full decode within a stated tolerance."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from pipeline.cli import main as convert
from trainer import input_fn, manifest_io, train
from trainer.errors import TrainerError

SPEC = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/format": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
}
# Reduced-scale decode + resize vs full decode + the same resize, on the sample's JPEGs (64 px):
# image size -> (DCT ratio used, max mean |difference| of one image, max mean over the sample),
# in levels of 255. At 8x the full decode + bilinear resize is the one that aliases: see below.
TOLERANCES = {32: (2, 4.0, 2.0), 16: (4, 4.5, 2.5), 8: (8, 10.0, 5.0)}


def sample_records(data) -> list[dict]:
    """Every record of every split of a converted dataset, in file order, parsed."""
    manifest = manifest_io.load_manifest(str(data))
    records = []
    for split in manifest.splits:
        for path in manifest_io.shard_paths(str(data), manifest, split):
            records += [tf.io.parse_single_example(r, SPEC) for r in tf.data.TFRecordDataset(path, "GZIP")]
    return records


def full_decode_reference(encoded, size: int, fraction: float | None = None) -> np.ndarray:
    """A full-resolution decode, the central crop by the reference's arithmetic, bilinear resize."""
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    if fraction:
        height, width = image.shape[:2]
        side = max(int(fraction * min(height, width)), 1)
        y, x = (height - side + 1) // 2, (width - side + 1) // 2
        image = image[y : y + side, x : x + side]
    return tf.saturate_cast(tf.round(tf.image.resize(image, [size, size])), tf.uint8).numpy()


def test_preprocessing_has_static_shapes_in_every_mode():
    for crop in ("random", "center", "none"):

        @tf.function(input_signature=[tf.TensorSpec([], tf.string)])
        def one(encoded, crop=crop):
            return input_fn.preprocess_image(encoded, 24, crop=crop, flip=crop == "random")

        spec = one.get_concrete_function().structured_outputs
        assert spec.shape.as_list() == [24, 24, 3] and spec.dtype == tf.uint8, crop


def test_every_record_of_every_format_goes_through(image_dataset):
    manifest = manifest_io.load_manifest(str(image_dataset))
    records = sample_records(image_dataset)
    formats = collections.Counter(r["image/format"].numpy().decode() for r in records)
    assert formats.keys() == {"jpeg", "png"} and sum(formats.values()) == 360, formats
    for training in (True, False):
        seen = 0
        for split in manifest.splits:
            dataset = input_fn.image_dataset(
                str(image_dataset), manifest, split, 1, image_size=24, training=training, repeat=False
            )
            assert dataset.element_spec[0].shape.as_list() == [1, 24, 24, 3]
            for images, _ in dataset:
                assert images.dtype == tf.uint8 and images.shape == (1, 24, 24, 3)
                assert float(tf.math.reduce_std(tf.cast(images, tf.float32))) > 1.0  # a picture, not a blank
                seen += 1
        assert seen == len(records), training


def test_evaluation_images_match_a_full_decode_record_by_record(image_dataset):
    """Evaluation reads in file order: each image is its record's, center-cropped (decoded at full
    scale here: the crop of a 64 px image is under twice 32 px), its label the record's label."""
    manifest = manifest_io.load_manifest(str(image_dataset))
    for split in manifest.splits:
        paths = manifest_io.shard_paths(str(image_dataset), manifest, split)
        records = [tf.io.parse_single_example(r, SPEC) for r in input_fn.record_dataset(paths, training=False)]
        dataset = input_fn.image_dataset(str(image_dataset), manifest, split, 1, image_size=32, training=False)
        got = [(x[0].numpy().astype(int), int(y[0])) for x, y in dataset]
        assert len(got) == len(records)
        for i, (record, (image, label)) in enumerate(zip(records, got, strict=True)):
            assert label == int(record["image/class/label"]) - manifest.label_offset, i
            expected = full_decode_reference(record["image/encoded"], 32, input_fn.CENTER_CROP_FRACTION).astype(int)
            assert np.abs(image - expected).mean() < 0.5, (split, i)  # its own image...
            other = full_decode_reference(records[i - 1]["image/encoded"], 32, input_fn.CENTER_CROP_FRACTION)
            assert np.abs(image - other.astype(int)).mean() > 1.0 or label == int(records[i - 1]["image/class/label"])


@pytest.mark.parametrize("size", sorted(TOLERANCES))
def test_reduced_scale_decode_is_close_to_a_full_decode(image_dataset, size):
    ratio, per_image, overall = TOLERANCES[size]
    jpegs = [r["image/encoded"] for r in sample_records(image_dataset) if r["image/format"].numpy() == b"jpeg"]
    assert len(jpegs) == 248
    assert 2 ** int(input_fn._ratio_index(tf.constant(64), size)) == ratio  # the sample is 64 x 64
    differences = []
    for encoded in jpegs:
        reduced = input_fn.preprocess_image(encoded, size).numpy().astype(int)
        differences.append(np.abs(reduced - full_decode_reference(encoded, size).astype(int)).mean())
    assert max(differences) <= per_image and np.mean(differences) <= overall, (max(differences), np.mean(differences))
    if ratio == 8:  # here the full-resolution bilinear resize aliases; DCT scaling averages blocks
        antialiased = [
            tf.image.resize(tf.io.decode_jpeg(e, channels=3), [size, size], antialias=True).numpy() for e in jpegs
        ]
        reduced = [input_fn.preprocess_image(e, size).numpy() for e in jpegs]
        full = [full_decode_reference(e, size) for e in jpegs]
        assert np.mean(np.abs(np.array(reduced) - antialiased)) < np.mean(np.abs(np.array(full) - antialiased))


def test_a_random_crop_that_finds_no_box_falls_back_to_the_center_crop(image_dataset):
    impossible = input_fn.Augmentation(area_range=(0.08, 0.1), min_object_covered=0.5)
    records = sample_records(image_dataset)
    for record in [*records[:5], *[r for r in records if r["image/format"].numpy() == b"png"][:5]]:
        encoded = record["image/encoded"]
        random = input_fn.preprocess_image(encoded, 16, crop="random", settings=impossible)
        center = input_fn.preprocess_image(encoded, 16, crop="center")
        np.testing.assert_array_equal(random.numpy(), center.numpy())


def test_random_crops_vary_and_decode_only_a_window():
    """A 640 x 480 JPEG: random windows differ from one call to the next, and a large window is
    decoded at a reduced scale (its decoded short side is under twice the target)."""
    rng = np.random.default_rng(0)
    pixels = np.clip(rng.normal(128, 40, (480, 640, 3)), 0, 255).astype(np.uint8)
    encoded = tf.io.encode_jpeg(pixels, quality=90)
    outputs = {input_fn.preprocess_image(encoded, 32, crop="random").numpy().tobytes() for _ in range(5)}
    assert len(outputs) == 5
    window = tf.constant([0, 0, 480, 640])
    decoded = input_fn.decode_window(encoded, window, 100)  # 480 // 4 = 120 >= 100
    assert decoded.shape == (120, 160, 3)
    center = input_fn.decode_window(encoded, tf.constant([40, 80, 400, 400]), 200)  # ratio 2
    full = tf.io.decode_jpeg(encoded, channels=3, ratio=2)[20:220, 40:240]
    np.testing.assert_array_equal(center.numpy(), full.numpy())


@pytest.fixture(scope="module")
def labelled_by_pixels(tmp_path_factory):
    """Images whose grey level is their class (a: 40, b: 128, c: 215), JPEG and PNG, RGB and grey,
    from 40 to 900 px (every DCT ratio at 32 px), converted with label_offset 1."""
    root = tmp_path_factory.mktemp("by_pixels")
    sizes = [(40, 30), (90, 70), (200, 150), (300, 420), (640, 480), (900, 600)]
    for label, level in (("a", 40), ("b", 128), ("c", 215)):
        (root / "in" / label).mkdir(parents=True)
        for i, size in enumerate(sizes * 2):
            mode = "L" if i % 3 == 2 else "RGB"
            image = Image.new(mode, size, level if mode == "L" else (level, level, level))
            image.save(root / "in" / label / f"{i}.{'png' if i % 4 == 1 else 'jpg'}")
    config = root / "offset.yaml"
    config.write_text("image:\n  label_offset: 1\n")
    out = root / "out"
    assert convert(["--input", str(root / "in"), "--output", str(out), "--config", str(config)]) == 0
    return out


def test_labels_stay_with_their_images_when_shuffled_cropped_and_flipped(labelled_by_pixels):
    manifest = manifest_io.load_manifest(str(labelled_by_pixels))
    assert manifest.label_offset == 1 and manifest.label_map == ("a", "b", "c")
    levels = np.array([40, 128, 215])
    for training in (True, False):
        dataset = input_fn.image_dataset(
            str(labelled_by_pixels), manifest, "train", 4, image_size=32, training=training, repeat=True, seed=5
        )
        for images, labels in dataset.take(40):
            means = tf.reduce_mean(tf.cast(images, tf.float32), axis=[1, 2, 3]).numpy()
            np.testing.assert_array_equal(np.abs(means[:, None] - levels).argmin(1), labels.numpy())


def test_augmentation_settings_are_checked_and_reach_the_input_from_the_flags(image_dataset):
    with pytest.raises(TrainerError, match="train crop"):
        input_fn.Augmentation(train_crop="zoom")
    with pytest.raises(TrainerError, match="center crop fraction"):
        input_fn.Augmentation(center_fraction=0)
    defaults = train.plan_job(train.parser().parse_args(["--data", str(image_dataset), "--model_dir", "m"]))
    assert defaults.make_dataset.keywords["augmentation"] == input_fn.Augmentation()
    assert input_fn.Augmentation() == input_fn.Augmentation("random", "center", True)
    argv = ["--data", str(image_dataset), "--model_dir", "m", "--train_crop", "none", "--eval_crop", "none"]
    job = train.plan_job(train.parser().parse_args([*argv, "--no_flip"]))
    assert job.make_dataset.keywords["augmentation"] == input_fn.Augmentation("none", "none", False)


@settings(max_examples=60, deadline=None)
@given(
    height=st.integers(1, 40),
    width=st.integers(1, 40),
    size=st.integers(1, 48),
    level=st.integers(0, 255),
    seed=st.integers(0, 2**32 - 1),
)
def test_resizing_rounds_to_the_nearest_level_and_never_wraps(height, width, size, level, seed):
    """input_fn.resized: the bilinear resize rounded to uint8 (ties may go either way), a flat image
    stays its level (255 does not wrap to 0), and a window already the size is left as it is."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    got = input_fn.resized(tf.constant(pixels), size).numpy()
    exact = tf.image.resize(tf.cast(pixels, tf.float64), [size, size]).numpy()
    assert got.shape == (size, size, 3) and np.abs(got - exact).max() <= 0.5 + 1e-6
    flat = input_fn.resized(tf.fill([height, width, 3], tf.constant(level, tf.uint8)), size).numpy()
    assert (flat == level).all()
    same = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    np.testing.assert_array_equal(input_fn.resized(tf.constant(same), size).numpy(), same)
