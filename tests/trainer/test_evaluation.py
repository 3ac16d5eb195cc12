"""Evaluation covers every record of its split, whatever the batch size and the number of replicas
and input pipelines: the last batches are padded with zero-weight elements (static shapes, as
TPUs need), and the loss and accuracy the trainer reports equal a computation by hand over every
record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from core.contract.manifest import Counts, FeatureSpec, Manifest, SplitInfo
from tests.dataset_reader import read_split
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from tests.trainer.conftest import IRIS_HEADER, REPO, args, convert_table, separated_rows
from trainer import input_fn, manifest_io, train


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Iris-like, 150 rows: a validation split of 30, not a multiple of the batches below."""
    return convert_table(tmp_path_factory.mktemp("table"), IRIS_HEADER, separated_rows(150, seed=4))


def by_hand(net, features: dict, labels: np.ndarray) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of `net` over every record, in one batch."""
    logits = net(features, training=False).numpy()
    loss = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True).numpy()
    return float(loss.mean()), float((logits.argmax(-1) == labels).mean())


def test_tabular_metrics_are_those_of_every_record(table, tmp_path, capsys):
    records = read_split(table, "validation")
    assert len(records) % 16
    code = train.main(
        [str(a) for a in ["--data", table, "--model_dir", tmp_path / "m", "--label", "species", "--num_classes", 3]]
        + ["--batch_size", "16", "--epochs", "2", "--seed", "2"]
    )
    assert code == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "m" / "training_summary.json").read_text())
    assert summary["val_records"] == len(records) and [h["val_records"] for h in summary["history"]] == [30, 30]
    assert f"val_records {len(records)}" in out and f"({len(records)} records)" in out

    served = tf.saved_model.load(str(tmp_path / "m" / "export"))
    features = {c: np.array([r[c] for r in records], np.float32) for c in IRIS_HEADER[:-1]}
    labels = np.array([r["species"] for r in records])
    loss, accuracy = by_hand(lambda x, training: served.serve(x), features, labels)
    assert summary["val_accuracy"] == pytest.approx(accuracy, abs=1e-9)
    assert summary["val_loss"] == pytest.approx(loss, rel=1e-5)


def test_image_metrics_are_those_of_every_record(image_dataset, tmp_path):
    manifest = manifest_io.load_manifest(str(image_dataset))
    records = manifest.splits["validation"].records
    assert records % 16
    flags = ["--data", image_dataset, "--model_dir", tmp_path / "m", "--image_size", 24, "--batch_size", 16]
    outcome = train.run(args(*flags, "--steps", 3, "--no_export", "--seed", 1))
    assert outcome.result.val_records == records

    one_by_one = outcome.job.make_dataset(split="validation", batch_size=1, training=False)
    images, labels = zip(*[(x.numpy()[0], y.numpy()[0]) for x, y in one_by_one], strict=True)
    assert len(labels) == records
    loss, accuracy = by_hand(outcome.loop.model, np.stack(images), np.array(labels))
    assert outcome.result.val_accuracy == pytest.approx(accuracy, abs=1e-9)
    assert outcome.result.val_loss == pytest.approx(loss, rel=1e-5)


@pytest.mark.parametrize("pipelines", [2, 3])
@pytest.mark.parametrize("kind", ["images", "csv"])
def test_input_pipelines_together_evaluate_each_record_once(image_dataset, table, kind, pipelines):
    """Several hosts (input pipelines), 2 replicas each: their padded datasets give the same
    number of batches, and together every record of the split exactly once (the image split has
    2 shards, shared out by file or, for 3 pipelines, by record; the table's 1 shard by record)."""
    data = str(image_dataset if kind == "images" else table)
    manifest = manifest_io.load_manifest(data)
    expected = sorted(
        bytes(r.numpy())
        for r in input_fn.record_dataset(
            manifest_io.shard_paths(data, manifest, "validation"), training=False, compression_type="GZIP"
        )
    )

    def make(**kw):
        if kind == "images":
            return input_fn.image_dataset(data, manifest, "validation", image_size=8, training=False, **kw)
        return input_fn.tabular_dataset(data, manifest, "validation", label="species", training=False, **kw)

    replicas, batch = 2 * pipelines, 4
    seen, batches = [], set()
    for pipeline_id in range(pipelines):
        context = tf.distribute.InputContext(pipelines, pipeline_id, replicas)
        steps = input_fn.evaluation_steps(manifest, "validation", batch, context)
        padded = list(make(batch_size=batch, input_context=context, padded=True))
        batches.add(len(padded))
        assert len(padded) == steps * 2  # a batch per replica and step
        for *_, weights in padded:
            assert weights.shape == (batch,)
        seen.append(sum(float(w.numpy().sum()) for *_, w in padded))
        # The weighted elements are this pipeline's records, in order, then only filling.
        flat = np.concatenate([w.numpy() for *_, w in padded])
        assert list(flat) == sorted(flat, reverse=True)
    assert len(batches) == 1
    assert sum(seen) == len(expected) == manifest.splits["validation"].records


def _manifest(lengths: list[int], known: bool) -> Manifest:
    """A manifest of one split of shards holding `lengths` records (said per shard when `known`)."""
    shards = tuple(f"validation-{i:05d}" for i in range(len(lengths)))
    split = SplitInfo("validation", sum(lengths), shards, shard_lengths=tuple(lengths) if known else ())
    return Manifest("csv", {"validation": split}, {"x": FeatureSpec("x", "float32")}, Counts(0, 0, 0, 0, 0))


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 500), min_size=1, max_size=12),
    pipelines=st.integers(1, 8),
    per_host=st.integers(1, 8),
    batch=st.integers(1, 64),
    known=st.booleans(),
)
def test_evaluation_steps_cover_the_largest_share_and_no_more(lengths, pipelines, per_host, batch, known):
    """Whatever the shards and hosts: enough steps for the pipeline with the most records, and
    one step fewer would leave some of them out (where the shares are known: shard lengths in the
    manifest, or records shared round robin)."""
    manifest = _manifest(lengths, known)
    context = tf.distribute.InputContext(pipelines, 0, pipelines * per_host)
    steps = input_fn.evaluation_steps(manifest, "validation", batch, context)
    shares = input_fn.pipeline_records(manifest, "validation", pipelines)
    assert len(shares) == pipelines and steps >= 1
    assert all(share <= steps * batch * per_host for share in shares)
    if known or pipelines == 1 or len(lengths) < pipelines:
        assert sum(shares) == sum(lengths)
        assert max(shares) > (steps - 1) * batch * per_host


def test_two_replicas_evaluate_every_record(table, tmp_path):
    """MirroredStrategy over 2 logical CPUs: each replica gets half of each global batch, the last
    one padded; the metrics equal those of the same model over every record by hand, and both
    replicas hold the training split's statistics."""
    script = textwrap.dedent(f"""
        import numpy as np, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        from tests.dataset_reader import read_split
        from trainer import data_statistics, train

        train.make_strategy = lambda tpu: tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        data = {str(table)!r}
        argv = ["--data", data, "--model_dir", {str(tmp_path / "m")!r}, "--label", "species", "--num_classes", "3",
                "--batch_size", "8", "--epochs", "1", "--seed", "1", "--no_export"]
        outcome = train.run(train.parser().parse_args(argv))
        result = outcome.result
        assert outcome.strategy.num_replicas_in_sync == 2
        records = read_split(data, "validation")
        assert result.val_records == len(records) and len(records) % 8, (result.val_records, len(records))
        net = outcome.loop.model
        columns = outcome.job.numeric_columns
        features = {{c: np.array([r[c] for r in records], np.float32) for c in columns}}
        labels = np.array([r["species"] for r in records])
        logits = net(features, training=False).numpy()
        loss = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True).numpy().mean()
        accuracy = (logits.argmax(-1) == labels).mean()
        assert abs(result.val_accuracy - accuracy) < 1e-9, (result.val_accuracy, accuracy)
        assert abs(result.val_loss - loss) < 1e-5 * loss, (result.val_loss, loss)
        read = data_statistics.column_statistics(data, outcome.job.manifest, "train", columns)
        layer = net.get_layer("normalize")
        mirrored = layer.mean.value  # the tf.distribute variable, one value per replica
        assert len(mirrored.values) == 2, mirrored
        for value in mirrored.values:
            np.testing.assert_allclose(value.numpy(), read.mean, rtol=1e-6)
        print("OK", result.val_records)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
    )
    assert done.returncode == 0 and "OK 30" in done.stdout, done.stdout + done.stderr[-3000:]
