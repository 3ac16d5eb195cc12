"""Reader profiles: the settings that make the output readable unchanged by readers that expect
ImageNet-style TFRecords (`image.label_offset`, `image.jpeg_only` and friends, `image/source_id`),
and configs/tpu_resnet.yaml replayed through the TPU reference ResNet reader (its parse, labels,
decode and both crops) on every record of the bundled sample; tests/test_profiles_on_a_messy_corpus.py
runs every profile on a messy corpus. The project's own readers (trainer, `inspect --verify`)
follow the manifest's label_offset."""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import os
import pathlib
import shutil

import pytest
import tensorflow as tf
from PIL import Image

from core.contract.features import source_id
from core.contract.manifest import Manifest
from pipeline.cli import main
from pipeline.commands import inspect
from pipeline.config import ConfigError, load_config
from pipeline.publish import feature_specs
from tests.dataset_reader import load_manifest
from tests.reader_replays import TPU_IMAGE_SIZE, TPU_RESNET, traced
from trainer import input_fn
from transforms.image_check import Encoding
from transforms.image_convert import ImageConverter, ImageSettings
from transforms.outcomes import Record, Source

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample" / "images"
TPU_RESNET_PROFILE = REPO / "configs" / "tpu_resnet.yaml"

# tensorflow/tpu models/official/resnet/imagenet_input.py, ImageNetTFExampleInput.dataset_parser
# (https://github.com/tensorflow/tpu/blob/61dbdbc1714d9d0e7f96f2db93b365e9198728dd/models/official/resnet/imagenet_input.py),
# its tf.compat.v1 `tf.FixedLenFeature` spelled tf.io.FixedLenFeature.
KEYS_TO_FEATURES = {
    "image/encoded": tf.io.FixedLenFeature((), tf.string, ""),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64, -1),
}
# What this test reads besides, to check the reader's labels and sizes against the record's own.
CHECKS = {
    "image/class/text": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/format": tf.io.FixedLenFeature([], tf.string),
    "image/filename": tf.io.FixedLenFeature([], tf.string),
    "image/source_id": tf.io.FixedLenFeature([], tf.string),
}


def tpu_reader_records(data_dir: pathlib.Path, split: str):
    """(label, image/encoded, the record's other features) per record of `split`, read as the TPU
    reader reads: its file pattern, uncompressed TFRecordDataset, its parse spec and its
    `label -= 1`. Its decode and crops are tests/reader_replays.py's."""
    files = tf.data.Dataset.list_files(os.path.join(str(data_dir), f"{split}-*"), shuffle=False)
    for value in files.interleave(lambda f: tf.data.TFRecordDataset(f, buffer_size=8 * 1024 * 1024)):
        parsed = tf.io.parse_single_example(value, KEYS_TO_FEATURES)
        image_bytes = tf.reshape(parsed["image/encoded"], shape=[])
        label = tf.cast(tf.reshape(parsed["image/class/label"], shape=[]), dtype=tf.int32)
        label -= 1  # include_background_label=False: "'image/class/label' is encoded as an integer from 1"
        yield int(label), image_bytes, tf.io.parse_single_example(value, CHECKS)


@pytest.fixture(scope="module")
def tpu_dataset(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("tpu_resnet") / "dataset"
    assert main(["--config", str(TPU_RESNET_PROFILE), "--input", str(SAMPLE), "--output", str(out)]) == 0
    return out


def sample_formats() -> dict[str, str]:
    """Pillow's format of each sample image, by its path below the sample folder."""
    return {p.relative_to(SAMPLE).as_posix(): Image.open(p).format for p in sorted(SAMPLE.rglob("*")) if p.is_file()}


def test_the_tpu_resnet_reader_reads_every_record_of_the_sample(tpu_dataset):
    manifest = load_manifest(tpu_dataset)
    formats = sample_formats()
    not_jpeg = sum(f != "JPEG" for f in formats.values())
    assert not_jpeg > 0  # the sample has PNGs, which decode_and_crop_jpeg fails on unless re-encoded
    assert manifest.label_offset == 1
    assert manifest.counts.converted == not_jpeg
    num_classes = len(manifest.label_map)

    replays = {name: traced(replay) for name, replay in TPU_RESNET.items()}
    read = collections.Counter()
    for split in ("train", "validation"):  # the reader's two file patterns
        labels = collections.Counter()
        for label, image_bytes, record in tpu_reader_records(tpu_dataset, split):
            assert 0 <= label < num_classes
            assert manifest.label_map[label] == record["image/class/text"].numpy().decode()
            shape = tf.image.extract_jpeg_shape(image_bytes).numpy().tolist()  # as the reader sizes its crops
            assert shape[:2] == [record["image/height"], record["image/width"]]
            for replay in replays.values():
                assert replay(image_bytes).shape == (TPU_IMAGE_SIZE, TPU_IMAGE_SIZE, 3)
            assert record["image/format"].numpy() == b"jpeg"
            key = pathlib.Path(record["image/filename"].numpy().decode()).relative_to(SAMPLE).as_posix()
            assert record["image/source_id"].numpy().decode() == source_id(key)
            labels[manifest.label_map[label]] += 1
            read[split] += 1
        assert labels == manifest.splits[split].label_counts
    assert read == {name: split.records for name, split in manifest.splits.items()}
    assert sum(read.values()) == manifest.counts.written == len(formats)


def test_the_project_readers_follow_the_label_offset(tpu_dataset, tmp_path, capsys):
    manifest = load_manifest(tpu_dataset)
    split = manifest.splits["validation"]
    expected = collections.Counter({i: split.label_counts[name] for i, name in enumerate(manifest.label_map)})

    def trainer_labels(m: Manifest) -> collections.Counter:
        dataset = input_fn.image_dataset(str(tpu_dataset), m, "validation", 1, image_size=8, training=False)
        return collections.Counter(int(label) for _, labels in dataset for label in labels.numpy())

    assert trainer_labels(manifest) == expected  # 0-based class ids, as the model's logits index them
    shifted = trainer_labels(dataclasses.replace(manifest, label_offset=0))  # the offset, ignored
    assert shifted == collections.Counter({i + 1: n for i, n in expected.items()})

    assert inspect.main([str(tpu_dataset), "--verify"]) == 0, capsys.readouterr().out
    capsys.readouterr()
    # The same records under a manifest that says they are 0-based: the last class is out of range.
    ignored = tmp_path / "offset_ignored"
    shutil.copytree(tpu_dataset, ignored)
    body = json.loads((ignored / "manifest.json").read_text())
    body["label_offset"] = 0
    (ignored / "manifest.json").write_text(json.dumps(body))
    assert inspect.main([str(ignored), "--verify"]) == 1
    out = capsys.readouterr().out
    assert f"label {len(manifest.label_map)} is outside the label map (0..{len(manifest.label_map) - 1})" in out


def test_older_manifests_read_as_label_offset_0(tpu_dataset):
    body = json.loads((tpu_dataset / "manifest.json").read_text())
    del body["label_offset"]
    assert Manifest.from_json(json.dumps(body)).label_offset == 0
    assert Manifest.from_json(json.dumps({**body, "label_offset": 1})).label_offset == 1


def read_one(tmp_path, data: bytes, keys: dict[str, str], **settings) -> dict:
    """ReadImages' record for one file labelled 'b' (of 'a', 'b'), as {feature key: values}."""
    path = tmp_path / "b" / "x.png"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    converter = ImageConverter(ImageSettings(("a", "b"), keys, 10_000_000, **settings))
    outcome, _ = converter.convert(Source(str(path), "b/x.png", "b", "train"))
    assert isinstance(outcome, Record), outcome
    features = tf.train.Example.FromString(outcome.data).features.feature
    return {key: getattr(f, f.WhichOneof("kind")).value[0] for key, f in features.items()} | {
        "converted": outcome.converted
    }


def png_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGBA", (20, 10), (10, 200, 30, 128)).save(buffer, "PNG")
    return buffer.getvalue()


def test_read_images_writes_the_offset_label_the_re_encoding_and_the_source_id(tmp_path):
    keys = load_config(None).image_keys
    plain = read_one(tmp_path, png_bytes(), keys)
    assert (plain["image/class/label"], plain["image/format"], plain["image/channels"]) == (1, b"png", 4)
    assert not plain["converted"]
    profiled = read_one(tmp_path, png_bytes(), keys, label_offset=1, encoding=Encoding(jpeg_only=True))
    assert (profiled["image/class/label"], profiled["image/format"], profiled["image/channels"]) == (2, b"jpeg", 3)
    assert profiled["converted"]
    assert plain["image/source_id"] == profiled["image/source_id"] == source_id("b/x.png").encode()


def test_the_source_id_role_can_be_renamed(tmp_path):
    config = load_config(None, {"image": {"keys": {"source_id": "image/id"}}})
    assert config.image_keys["source_id"] == "image/id"
    assert feature_specs(config.image_keys, None)["image/id"].dtype == "string"
    record = read_one(tmp_path, png_bytes(), config.image_keys)
    assert record["image/id"] == source_id("b/x.png").encode() and "image/source_id" not in record
    with pytest.raises(ConfigError, match="two roles would write the same feature key"):
        load_config(None, {"image": {"keys": {"source_id": "image/filename"}}})


def test_source_ids_are_stable_distinct_int64_strings_as_model_garden_parses_them():
    keys = [f"{label}/{i:04d}.jpg" for label in ("circle", "square") for i in range(500)]
    ids = [source_id(key) for key in keys]
    assert ids == [source_id(key) for key in keys] and len(set(ids)) == len(ids)
    # official/vision/dataloaders/utils.py process_source_id: tf.strings.to_number(source_id, tf.int64)
    parsed = tf.strings.to_number(tf.constant(ids), tf.int64).numpy()
    assert [str(n) for n in parsed] == ids
    assert all(0 <= n < 2**53 for n in parsed)  # exact in float64 and JSON too


def test_profile_settings_load_and_default_to_the_plain_output():
    image = load_config(None).image
    assert (image.label_offset, image.jpeg_only, image.jpeg_quality, image.alpha) == (0, False, 95, "composite")
    assert image.min_side == 1
    profile = load_config(str(TPU_RESNET_PROFILE))
    assert profile.image.encoding == Encoding(jpeg_only=True, jpeg_quality=95, alpha="composite", min_side=2)
    assert (profile.image.label_offset, profile.compression) == (1, "none")


@pytest.mark.parametrize(
    "image, message",
    [
        ({"label_offset": -1}, "image.label_offset: should be greater than or equal to 0, got -1"),
        ({"label_offset": "1"}, "image.label_offset: should be an integer, got '1' (a string)"),
        ({"label_offset": 1.0}, "image.label_offset: should be an integer, got 1.0"),
        ({"jpeg_only": "yes"}, "image.jpeg_only: should be true or false (a YAML boolean, unquoted), got 'yes'"),
        ({"jpeg_quality": 0}, "image.jpeg_quality: should be greater than or equal to 1, got 0"),
        ({"jpeg_quality": 101}, "image.jpeg_quality: should be less than or equal to 100, got 101"),
        ({"alpha": "blend"}, "image.alpha: should be 'composite' or 'drop', got 'blend'"),
        ({"min_side": 0}, "image.min_side: should be greater than or equal to 1, got 0"),
        ({"min_side": 2.0}, "image.min_side: should be an integer, got 2.0"),
    ],
)
def test_bad_profile_settings_say_what_is_wrong(tmp_path, image, message):
    path = tmp_path / "profile.yaml"
    path.write_text(json.dumps({"image": image}))  # JSON is YAML
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
