"""The trainer's tf.data input functions over real pipeline output."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from core.contract.readers import assign_shards
from tests.dataset_reader import read_split
from trainer import input_fn, manifest_io
from trainer.errors import BatchSizeError, MissingFeatureError, TrainerError


def test_image_batches_have_static_shapes_and_sane_values(image_dataset):
    manifest = manifest_io.load_manifest(str(image_dataset))
    dataset = input_fn.image_dataset(str(image_dataset), manifest, "train", 16, image_size=40, training=True, seed=3)

    images_spec, labels_spec = dataset.element_spec
    assert images_spec.shape.as_list() == [16, 40, 40, 3] and images_spec.dtype == tf.uint8
    assert labels_spec.shape.as_list() == [16] and labels_spec.dtype == tf.int32
    steps = manifest.splits["train"].records // 16
    labels = []
    for images, batch_labels in dataset.take(steps + 3):  # training data repeats past an epoch
        assert images.shape == (16, 40, 40, 3)
        assert float(tf.math.reduce_std(tf.cast(images, tf.float32))) > 5.0  # real pictures, not blank
        labels += batch_labels.numpy().tolist()
    assert len(labels) == 16 * (steps + 3)
    assert set(labels) == {0, 1, 2}


def test_evaluation_reads_validation_deterministically_in_full_batches(image_dataset):
    manifest = manifest_io.load_manifest(str(image_dataset))
    records = manifest.splits["validation"].records

    def labels():
        dataset = input_fn.image_dataset(str(image_dataset), manifest, "validation", 16, image_size=24, training=False)
        assert dataset.element_spec[0].shape.as_list() == [16, 24, 24, 3]
        return np.concatenate([y.numpy() for _, y in dataset])

    first, second = labels(), labels()
    assert len(first) == (records // 16) * 16  # one pass, remainder dropped
    np.testing.assert_array_equal(first, second)
    # The shards read round-robin, one record at a time (deterministic interleave).
    per_shard = []
    for path in manifest_io.shard_paths(str(image_dataset), manifest, "validation"):
        raw = tf.data.TFRecordDataset(path, compression_type="GZIP")
        per_shard.append(
            [
                int(
                    tf.io.parse_single_example(r, {"image/class/label": tf.io.FixedLenFeature([], tf.int64)})[
                        "image/class/label"
                    ]
                )
                for r in raw
            ]
        )
    expected = [shard[i] for i in range(max(map(len, per_shard))) for shard in per_shard if i < len(shard)]
    assert len(expected) == records
    np.testing.assert_array_equal(first, expected[: len(first)])


def test_input_pipelines_read_disjoint_shards(image_dataset):
    manifest = manifest_io.load_manifest(str(image_dataset))
    paths = manifest_io.shard_paths(str(image_dataset), manifest, "train")
    assert len(paths) == 2
    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
        )
        dataset = input_fn.record_dataset(paths, training=False, input_context=context)
        seen.append({bytes(r.numpy()) for r in dataset})
    assert seen[0] and seen[1] and not seen[0] & seen[1]
    assert len(seen[0]) + len(seen[1]) == manifest.splits["train"].records

    # More pipelines than files: each reads every file and keeps its share of the records,
    # still disjoint, also in training mode (file shuffling and non-determinism are turned off).
    seen = []
    for pipeline_id in range(3):
        context = tf.distribute.InputContext(
            num_input_pipelines=3, input_pipeline_id=pipeline_id, num_replicas_in_sync=3
        )
        dataset = input_fn.record_dataset(paths, training=True, repeat=False, input_context=context)
        seen.append([bytes(r.numpy()) for r in dataset])
    assert sum(map(len, seen)) == len(set().union(*map(set, seen))) == manifest.splits["train"].records


def test_files_are_assigned_to_pipelines_by_their_records():
    lengths = [90, 10, 10, 10, 10, 10, 10, 10, 10, 10]
    assigned = assign_shards(lengths, 2)
    assert sorted(i for files in assigned for i in files) == list(range(len(lengths)))
    assert [sum(lengths[i] for i in files) for files in assigned] == [90, 90]  # by files, not count
    assert assigned == assign_shards(lengths, 2), "every host computes the same assignment"
    assert all(assign_shards([0, 0, 0], 3)), "every pipeline gets a file when there are enough"


def test_pipelines_read_the_files_the_shard_lengths_assign(image_dataset):
    manifest = manifest_io.load_manifest(str(image_dataset))
    split = manifest.splits["train"]
    paths = manifest_io.shard_paths(str(image_dataset), manifest, "train")
    assert sum(split.shard_lengths) == split.records
    for pipeline_id, files in enumerate(assign_shards(split.shard_lengths, 2)):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
        dataset = input_fn.record_dataset(paths, training=False, input_context=context, lengths=split.shard_lengths)
        expected = [bytes(r.numpy()) for i in files for r in tf.data.TFRecordDataset(paths[i], "GZIP")]
        assert sorted(bytes(r.numpy()) for r in dataset) == sorted(expected)
        assert len(expected) == sum(split.shard_lengths[i] for i in files)


def test_tabular_input_yields_declared_dtypes_defaults_and_label(tabular_dataset):
    manifest = manifest_io.load_manifest(str(tabular_dataset))
    dataset = input_fn.tabular_dataset(str(tabular_dataset), manifest, "validation", 32, label="label", training=False)
    features_spec, label_spec = dataset.element_spec

    columns = [name for name in manifest.features if name != "label"]
    assert sorted(features_spec) == sorted(columns) == ["category", "count", "flag", "id", "x1", "x2", "x3"]
    for name, spec in features_spec.items():
        assert spec.dtype == tf.as_dtype(manifest.features[name].dtype), name
        assert spec.shape.as_list() == [32], name
    assert features_spec["flag"].dtype == tf.int64  # declared bool -> int64
    assert label_spec.dtype == tf.int32 and label_spec.shape.as_list() == [32]

    # Record by record against an independent reader, over every full batch (records come in a
    # random order, so one batch could hold no empty cell): missing cells become 0 / 0.0 / "".
    expected = read_split(tabular_dataset, "validation")
    defaults = {"string": b"", "int64": 0, "float32": 0.0}
    missing = batches = 0
    for batches, (features, labels) in enumerate(dataset, start=1):
        for i, record in enumerate(expected[(batches - 1) * 32 : batches * 32]):
            assert labels[i].numpy() == record["label"]
            for name in columns:
                want = record[name]
                missing += want is None
                want = defaults[manifest.features[name].dtype] if want is None else want
                got = features[name][i].numpy()
                assert got == pytest.approx(want) if isinstance(want, float) else got == want, (i, name)
    assert batches == len(expected) // 32
    assert missing > 0  # the sample has empty cells: the defaults were exercised


def test_tabular_strings_can_be_hashed_for_accelerators(tabular_dataset):
    manifest = manifest_io.load_manifest(str(tabular_dataset))
    dataset = input_fn.tabular_dataset(
        str(tabular_dataset),
        manifest,
        "train",
        64,
        label="label",
        features=["x1", "category"],
        string_buckets=8,
        training=True,
    )
    features, labels = next(iter(dataset))
    assert sorted(features) == ["category", "x1"]
    assert features["category"].dtype == tf.int64
    assert 0 <= int(tf.reduce_min(features["category"])) and int(tf.reduce_max(features["category"])) < 8
    assert labels.shape == (64,)


def test_input_errors_are_specific(image_dataset, tabular_dataset):
    images = manifest_io.load_manifest(str(image_dataset))
    with pytest.raises(BatchSizeError, match="larger than the 'validation' split"):
        input_fn.image_dataset(str(image_dataset), images, "validation", 10_000, training=False)
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=4)
    records = images.splits["validation"].records
    with pytest.raises(BatchSizeError):  # the per-replica batch times the replicas is what counts
        input_fn.image_dataset(
            str(image_dataset), images, "validation", records // 2, training=False, input_context=context
        )
    tabular = manifest_io.load_manifest(str(tabular_dataset))
    with pytest.raises(MissingFeatureError, match="'target'.*category, count"):
        input_fn.tabular_dataset(str(tabular_dataset), tabular, "train", 8, label="target", training=True)
    with pytest.raises(MissingFeatureError, match="'nope'"):
        input_fn.tabular_dataset(
            str(tabular_dataset), tabular, "train", 8, label="label", features=["x1", "nope"], training=True
        )
    with pytest.raises(TrainerError, match="missing from some records"):
        input_fn.tabular_dataset(str(tabular_dataset), tabular, "train", 8, label="x1", training=True)
