"""The tabular model's input normalisation: the mean and variance of every number column of the
training split (trainer.data_statistics), read once before a fresh model is built, kept in its
weights (model.Standardization) through checkpoints, resumes and the export; the model computes
the same in training and in evaluation, so validation means something from the first epoch."""

from __future__ import annotations

import random

import numpy as np
import tensorflow as tf

from tests.dataset_reader import read_split
from tests.trainer.conftest import IRIS_HEADER, args, convert_table, separated_rows
from trainer import data_statistics, input_fn, manifest_io, model, train

NUMBERS = ["x1", "x2", "x3", "count", "flag"]  # the sample's number columns (flag: optional, int64 0/1)


def test_the_statistics_are_those_of_every_training_record(tabular_dataset):
    manifest = manifest_io.load_manifest(str(tabular_dataset))
    read = data_statistics.column_statistics(str(tabular_dataset), manifest, "train", NUMBERS, "label")

    rows = read_split(tabular_dataset, "train")
    assert any(row["flag"] is None for row in rows)  # a missing value counts as the model sees it: 0
    values = np.array([[0 if row[c] is None else row[c] for c in NUMBERS] for row in rows], np.float64)
    assert read.records == len(rows) == manifest.splits["train"].records and read.complete
    np.testing.assert_allclose(read.mean, values.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(read.variance, values.var(axis=0), rtol=1e-12)
    assert (read.label_min, read.label_max) == (min(r["label"] for r in rows), max(r["label"] for r in rows))

    first = data_statistics.column_statistics(str(tabular_dataset), manifest, "train", NUMBERS, max_records=100)
    assert first.records == 100 and not first.complete


def test_a_column_far_from_zero_keeps_its_variance(tmp_path):
    """Millisecond timestamps (int64, ~1.7e12) a few seconds apart, over several read batches:
    sums of squares in float64 (3e24) would cancel the variance (~1e6) away."""
    rng = random.Random(5)
    rows = [[1_700_000_000_000 + rng.randrange(5_000), i % 2] for i in range(2_500)]
    data = convert_table(tmp_path, ("at", "y"), rows, "--splits", "train=1.0")
    manifest = manifest_io.load_manifest(str(data))
    assert manifest.features["at"].dtype == "int64"
    read = data_statistics.column_statistics(str(data), manifest, "train", ["at"])
    assert read.records == 2_500 > data_statistics.READ_BATCH
    at = np.array([r["at"] for r in read_split(data, "train")], np.float64)
    np.testing.assert_allclose(read.mean, [at.mean()], rtol=1e-12)
    # Within a millionth (the records' order, random per conversion, moves the last digits); the
    # float64 sums of squares would be off by about 1e9, hundreds of times the variance.
    np.testing.assert_allclose(read.variance, [at.var()], rtol=1e-6)
    naive = (at**2).mean() - at.mean() ** 2
    assert abs(naive - at.var()) > 1e-3 * at.var()  # what the pairwise update avoids


def test_the_model_computes_the_same_in_training_and_in_evaluation(tabular_dataset):
    """Nothing in it learns from batches (as BatchNormalization does, whose moving averages lag
    behind on short runs, so that evaluation sees other inputs than training did)."""
    manifest = manifest_io.load_manifest(str(tabular_dataset))
    columns = ["x1", "x2", "x3", "count", "category", "flag"]
    specs = {name: manifest.features[name] for name in columns}
    read = data_statistics.column_statistics(str(tabular_dataset), manifest, "train", model.numeric_columns(specs))
    net = model.tabular_model(specs, 3, 16, statistics=(read.mean, read.variance))
    dataset = input_fn.tabular_dataset(
        str(tabular_dataset), manifest, "train", 64, label="label", features=columns, string_buckets=16, training=False
    )
    features, _ = next(iter(dataset))
    np.testing.assert_array_equal(net(features, training=True).numpy(), net(features, training=False).numpy())
    layer = net.get_layer("normalize")
    np.testing.assert_allclose(layer.mean.numpy(), read.mean, rtol=1e-6)
    assert not layer.trainable_weights  # the statistics are the data's, not learned by the optimizer


def test_a_constant_column_is_only_centred():
    layer = model.Standardization([3.0, 1.0], [0.0, 4.0])
    np.testing.assert_array_equal(layer(np.array([[5.0, 5.0]], np.float32)).numpy(), [[2.0, 2.0]])


def test_validation_means_something_from_the_first_epoch(tmp_path):
    """Three well separated classes whose columns lie far from 0 (as prices, years or
    centimetres do): evaluated after one or two epochs, the validation accuracy is near the
    training split's, not chance. (Batch-normalised inputs were evaluated with moving averages
    still near their start: accuracy 0.34 after 10 epochs while training reached 0.86.)"""
    data = convert_table(tmp_path, IRIS_HEADER, separated_rows(300, seed=1, offset=100.0))
    flags = ["--data", data, "--label", "species", "--num_classes", "3", "--batch_size", "16", "--no_export"]
    outcome = train.run(args(*flags, "--model_dir", tmp_path / "m", "--epochs", 2, "--seed", 3))
    # 0.62 to 0.90 over seeds 1-5 (epochs 1 and 2); batch-normalised inputs: 0.295 for every seed.
    assert [epoch["val_accuracy"] >= 0.55 for epoch in outcome.result.history] == [True, True], outcome.result.history


def test_the_statistics_stay_with_the_model(tmp_path):
    """A fresh model takes the statistics of its training split; a resumed one keeps them from its
    checkpoint, even when the data it resumes on (a refresh, say) holds other values; the export
    standardises as the model does."""
    first = convert_table(tmp_path / "a", IRIS_HEADER, separated_rows(150, seed=1))
    later = convert_table(tmp_path / "b", IRIS_HEADER, separated_rows(150, seed=2, offset=50.0))
    flags = ["--model_dir", tmp_path / "m", "--label", "species", "--num_classes", "3", "--batch_size", "16"]
    started = train.run(args("--data", first, *flags, "--epochs", 1, "--no_export"))
    columns = started.job.numeric_columns  # in the model's order
    assert sorted(columns) == sorted(IRIS_HEADER[:-1])
    of_first = data_statistics.column_statistics(str(first), started.job.manifest, "train", columns)
    layer = started.loop.model.get_layer("normalize")
    np.testing.assert_allclose(layer.mean.numpy(), of_first.mean, rtol=1e-6)
    np.testing.assert_allclose(layer.variance.numpy(), of_first.variance, rtol=1e-6)

    resumed = train.run(args("--data", later, *flags, "--epochs", 2))
    assert resumed.result.restored_from and [h["epoch"] for h in resumed.result.history] == [2]
    layer = resumed.loop.model.get_layer("normalize")
    np.testing.assert_allclose(layer.mean.numpy(), of_first.mean, rtol=1e-6)  # not the later data's (~ +50)
    np.testing.assert_allclose(layer.variance.numpy(), of_first.variance, rtol=1e-6)

    features, _ = next(iter(resumed.job.make_dataset(split="validation", batch_size=8, training=False)))
    served = tf.saved_model.load(str(tmp_path / "m" / "export"))
    np.testing.assert_allclose(served.serve(features).numpy(), resumed.loop.model(features).numpy(), rtol=1e-5)
