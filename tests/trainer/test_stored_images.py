"""What a dataset's settings promise of its stored images (trainer.manifest_io.stored_images) lets
the trainer's decoding leave branches out (input_fn.preprocess_image): never a pixel changes, a
promise the records break still decodes them right, and a model asked to train larger than the
images are stored hears of it."""

from __future__ import annotations

import dataclasses
import io
import logging

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from pipeline.cli import main as convert
from trainer import input_fn, manifest_io, train

BRANCHES = {"If", "StatelessIf", "Case", "StatelessCase"}
SIDES = ("shorter_side", "longer_side")


@pytest.fixture(scope="module")
def promised(tmp_path_factory):
    """JPEGs and PNGs of 20 to 120 px, converted with jpeg_only and a shorter side of at most 48 px."""
    root = tmp_path_factory.mktemp("promised")
    rng = np.random.default_rng(3)
    for label in ("a", "b"):
        (root / "in" / label).mkdir(parents=True)
        for i, (width, height) in enumerate([(20, 30), (48, 48), (64, 40), (90, 120), (120, 70), (33, 100)] * 2):
            pixels = np.clip(rng.normal(128, 50, (height, width, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / "in" / label / f"{i}.{'png' if i % 3 == 0 else 'jpg'}")
    config = root / "promise.yaml"
    config.write_text("image:\n  jpeg_only: true\n  resize: {shorter_side: 48}\n")
    out = root / "out"
    assert convert(["--input", str(root / "in"), "--output", str(out), "--config", str(config)]) == 0
    return out


def _jpeg(width: int, height: int, seed: int) -> tf.Tensor:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, "JPEG", quality=90)
    return tf.constant(encoded.getvalue())


@settings(max_examples=300, deadline=None)
@given(
    image_size=st.integers(1, 600),
    ratio=st.sampled_from([1, 2, 4, 8, 16]),
    offset=st.integers(-9, 9),
    data=st.data(),
)
def test_the_ratios_left_out_are_never_chosen(image_size, ratio, offset, data):
    """Every window of an image within the promise picks a DCT ratio the promise keeps; bounds are
    drawn about where a ratio starts to keep image_size, where an off-by-one would show."""
    max_short_side = max(1, image_size * ratio + offset)
    kept = input_fn.usable_ratios(image_size, max_short_side)
    assert kept == input_fn._RATIOS[: len(kept)] and kept[0] == 1
    short_side = data.draw(st.one_of(st.just(max_short_side), st.integers(1, max_short_side)))
    assert int(input_fn._ratio_index(tf.constant(short_side), image_size)) < len(kept)
    assert input_fn.usable_ratios(image_size) == input_fn._RATIOS


@settings(max_examples=40, deadline=None)
@given(
    width=st.integers(1, 160),
    height=st.integers(1, 160),
    image_size=st.integers(1, 64),
    slack=st.integers(0, 200),
    crop=st.sampled_from(["center", "none"]),
    seed=st.integers(0, 2**16),
)
def test_a_kept_promise_changes_no_pixel(width, height, image_size, slack, crop, seed):
    encoded = _jpeg(width, height, seed)
    promise = manifest_io.StoredImages(all_jpeg=True, max_short_side=min(width, height) + slack)
    lean = input_fn.preprocess_image(encoded, image_size, crop=crop, stored=promise)
    general = input_fn.preprocess_image(encoded, image_size, crop=crop)
    np.testing.assert_array_equal(lean.numpy(), general.numpy())


def test_a_broken_promise_still_decodes_right():
    """A 640 x 480 window the general decoding takes at ratio 8 for 32 px: where the promise kept
    only ratios 1 and 2, it is decoded at 2, exactly as libjpeg decodes it at 2."""
    encoded = _jpeg(640, 480, 0)
    window = tf.constant([0, 0, 480, 640])
    assert int(input_fn._ratio_index(tf.constant(480), 32)) == 3
    decoded = input_fn.decode_window(encoded, window, 32, ratios=(1, 2))
    np.testing.assert_array_equal(decoded.numpy(), tf.io.decode_jpeg(encoded, channels=3, ratio=2).numpy())


def _branches(stored: manifest_io.StoredImages, crop: str, flip: bool) -> int:
    @tf.function(input_signature=[tf.TensorSpec([], tf.string)])
    def one(encoded):
        return input_fn.preprocess_image(encoded, 32, crop=crop, flip=flip, stored=stored)

    graph = one.get_concrete_function().graph.as_graph_def()
    nodes = [*graph.node, *(node for function in graph.library.function for node in function.node_def)]
    return sum(node.op in BRANCHES for node in nodes)


def test_a_promise_leaves_the_branches_out():
    """Training on JPEGs stored at most 48 px for 32 px: only the flip's branch is left; the center
    crop keeps its test for a window of the size (a 48 px image's crop at 7/8 is 42, another's may fit)."""
    promise = manifest_io.StoredImages(all_jpeg=True, max_short_side=48)
    assert _branches(promise, "random", flip=True) == 1
    assert _branches(manifest_io.StoredImages(), "random", flip=True) == 3  # format, DCT ratio, flip
    assert _branches(promise, "center", flip=False) == 1
    assert _branches(manifest_io.StoredImages(), "center", flip=False) == 3  # format, DCT ratio, fits


def test_the_manifest_s_settings_are_the_promise(promised, image_dataset):
    manifest = manifest_io.load_manifest(str(promised))
    assert manifest_io.stored_images(manifest) == manifest_io.StoredImages(all_jpeg=True, max_short_side=48)
    plain = manifest_io.load_manifest(str(image_dataset))
    assert manifest_io.stored_images(plain) == manifest_io.StoredImages()


@settings(max_examples=80, deadline=None)
@given(
    image=st.one_of(
        st.none(),
        st.integers(),
        st.fixed_dictionaries(
            {},
            optional={
                "jpeg_only": st.one_of(st.booleans(), st.none(), st.integers(0, 1), st.text(max_size=3)),
                "resize": st.one_of(
                    st.none(),
                    st.fixed_dictionaries(
                        {},
                        optional={side: st.one_of(st.none(), st.booleans(), st.integers(-5, 5000)) for side in SIDES},
                    ),
                ),
            },
        ),
    )
)
def test_only_settings_of_the_right_type_promise_anything(image_dataset, image):
    """A manifest written by hand or by another version: whatever its options.image holds, the
    promise is jpeg_only only where it is exactly true, and the bound Manifest.stored_bound reads
    (tests/core/test_stored_bound.py), or none."""
    manifest = dataclasses.replace(manifest_io.load_manifest(str(image_dataset)), options={"image": image})
    got = manifest_io.stored_images(manifest)
    bound = manifest.stored_bound
    assert got.max_short_side == (bound[1] if bound else None)
    assert got.all_jpeg is (isinstance(image, dict) and image.get("jpeg_only") is True)


def test_a_dataset_that_promises_reads_as_one_that_does_not(promised):
    """Evaluation on the promised dataset: each image is what the general decoding makes of its record."""
    manifest = manifest_io.load_manifest(str(promised))
    for split in manifest.splits:
        paths = manifest_io.shard_paths(str(promised), manifest, split)
        records = [
            tf.io.parse_single_example(r, {"image/encoded": tf.io.FixedLenFeature([], tf.string)})["image/encoded"]
            for r in input_fn.record_dataset(paths, training=False)
        ]
        dataset = input_fn.image_dataset(str(promised), manifest, split, 1, image_size=40, training=False)
        got = [images[0].numpy() for images, _ in dataset]
        assert len(got) == len(records) > 0
        for encoded, image in zip(records, got, strict=True):
            assert tf.io.is_jpeg(encoded)
            np.testing.assert_array_equal(image, input_fn.preprocess_image(encoded, 40, crop="center").numpy())


def test_training_larger_than_the_images_are_stored_is_warned_of(promised, tmp_path, caplog):
    caplog.set_level(logging.WARNING, "trainer")
    argv = ["--data", str(promised), "--model_dir", str(tmp_path / "m")]
    train.plan_job(train.parser().parse_args([*argv, "--image_size", "48"]))
    assert not caplog.records
    train.plan_job(train.parser().parse_args([*argv, "--image_size", "64"]))
    (record,) = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.WARNING and "--image_size 64" in message and "48 px" in message, message
