"""The training job end to end on CPU: learning, checkpoints and resuming, export, TensorBoard
logs, mixed precision, the division of the global batch among replicas, and the clear errors."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from tests.trainer.conftest import args
from trainer import train
from trainer.errors import (
    BatchSizeError,
    DatasetRejectedError,
    IncompleteManifestError,
    ManifestNotFoundError,
    MissingFeatureError,
)
from trainer.loop import TrainingLoop

REPO = pathlib.Path(__file__).resolve().parents[2]
TABULAR_FLAGS = [
    "--label",
    "label",
    "--num_classes",
    "3",
    "--batch_size",
    "64",
    "--features",
    "x1,x2,x3,count,category,flag",
]


def scalars(log_dir: pathlib.Path) -> dict[str, list[float]]:
    """{tag: values} of the TensorBoard event files in log_dir."""
    values: dict[str, list[float]] = {}
    for path in log_dir.glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                values.setdefault(value.tag, []).append(float(tf.make_ndarray(value.tensor)))
    return values


def test_trains_the_sample_above_chance_and_exports(image_dataset, tmp_path, capsys):
    model_dir = tmp_path / "model"
    code = train.main(
        [
            "--data",
            str(image_dataset),
            "--model_dir",
            str(model_dir),
            "--epochs",
            "15",
            "--batch_size",
            "16",
            "--image_size",
            "32",
            "--learning_rate",
            "0.003",
            "--steps_per_loop",
            "20",
            "--seed",
            "1",
            # Whole images: the default random crops (8-100% of the area) are for photos; on the
            # sample's 64 px drawings they often miss the shape (the crop is tested in test_decode).
            "--train_crop",
            "none",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "epoch 15" in out and "Trained small_cnn" in out

    summary = json.loads((model_dir / "training_summary.json").read_text())
    manifest = json.loads((image_dataset / "manifest.json").read_text())
    assert summary["step"] == 15 * (manifest["splits"]["train"]["records"] // 16)  # steps from the manifest
    assert summary["export_dir"] == str(model_dir / "export")  # what the run exported
    # 3 balanced classes: chance is 1/3; the sample's shapes are learnable in a few epochs. The
    # last epochs, not the last one alone: on a 2-core machine under load tf.data's interleave
    # order varies, and one epoch's accuracy on the small validation split with it.
    assert max(h["val_accuracy"] for h in summary["history"][-5:]) >= 0.5, summary["history"][-5:]
    assert summary["train_accuracy"] >= 0.6

    # Exported SavedModel: serves logits for a batch of uint8 pixels; class names alongside.
    export = model_dir / "export"
    assert (export / "labels.txt").read_text().split() == ["circle", "square", "triangle"]
    served = tf.saved_model.load(str(export))
    images = tf.cast(tf.random.uniform([5, 32, 32, 3], 0, 255, dtype=tf.int32), tf.uint8)
    assert served.serve(images).shape == (5, 3)
    # TensorBoard logs for both splits, one point per epoch.
    assert len(scalars(model_dir / "logs" / "train")["accuracy"]) == 15
    assert len(scalars(model_dir / "logs" / "validation")["accuracy"]) == 15
    assert sorted(p.name for p in (model_dir / "checkpoints").glob("ckpt-*.index"))  # checkpoints kept


def test_resumes_from_the_latest_checkpoint(tabular_dataset, tmp_path):
    model_dir = tmp_path / "model"
    common = ["--data", tabular_dataset, "--model_dir", model_dir, *TABULAR_FLAGS, "--no_export"]
    first = train.run(args(*common, "--epochs", "2"))
    steps_per_epoch = first.result.history[0]["step"]
    assert first.result.start_step == 0 and first.result.step == 2 * steps_per_epoch
    summary = json.loads((model_dir / "training_summary.json").read_text())
    assert summary["step"] == 2 * steps_per_epoch and summary["export_dir"] is None  # --no_export: none
    trained = [w.numpy() for w in first.loop.model.weights]
    iterations = int(first.loop.optimizer.iterations.numpy())

    # A fresh model restored from the directory equals the trained one, optimizer state included.
    job = train.plan_job(args(*common))
    fresh = TrainingLoop(tf.distribute.get_strategy(), job.build_model, first.loop.config)
    assert any(not np.array_equal(a, b.numpy()) for a, b in zip(trained, fresh.model.weights, strict=True))
    assert fresh.restore().endswith(f"ckpt-{2 * steps_per_epoch}")
    for a, b in zip(trained, fresh.model.weights, strict=True):
        np.testing.assert_array_equal(a, b.numpy())
    assert int(fresh.optimizer.iterations.numpy()) == iterations
    assert int(fresh.step.numpy()) == 2 * steps_per_epoch

    # Restarted with a longer target: carries on from step 2 epochs, trains only epoch 3.
    second = train.run(args(*common, "--epochs", "3"))
    assert second.result.restored_from.endswith(f"ckpt-{2 * steps_per_epoch}")
    assert second.result.start_step == 2 * steps_per_epoch and second.result.step == 3 * steps_per_epoch
    assert [m["epoch"] for m in second.result.history] == [3]
    assert int(second.loop.optimizer.iterations.numpy()) == iterations + steps_per_epoch
    assert second.result.val_accuracy > 0.6  # the sample's label is learnable from x1, x2, count

    # Restarted once more with the same target: nothing left to train.
    third = train.run(args(*common, "--epochs", "3"))
    assert third.result.start_step == third.result.step == 3 * steps_per_epoch and not third.result.history


def test_mixed_precision_trains_and_exports(tabular_dataset, tmp_path):
    flags = ["--data", tabular_dataset, "--model_dir", tmp_path / "m", *TABULAR_FLAGS, "--steps", "5"]
    outcome = train.run(args(*flags, "--mixed_precision"))
    assert outcome.policy == "mixed_bfloat16"  # CPU: bfloat16 as on TPU
    assert outcome.result.step == 5 and np.isfinite(outcome.result.val_loss)
    assert (tmp_path / "m" / "export" / "saved_model.pb").exists()


def test_steps_flag_and_regression_target(tabular_dataset, tmp_path):
    flags = ["--data", tabular_dataset, "--model_dir", tmp_path / "m", "--label", "id", "--task", "regression"]
    outcome = train.run(args(*flags, "--features", "x1,x2", "--batch_size", "100", "--steps", "3", "--no_export"))
    assert not outcome.job.classification and outcome.result.step == 3
    assert outcome.result.val_accuracy is None and np.isfinite(outcome.result.val_loss)


def test_global_batch_is_divided_among_replicas(image_dataset, tmp_path):
    """One SGD step on 2 replicas (logical CPUs) moves the weights exactly as on 1 device with
    the same global batch: each replica averages its loss over the global batch size."""
    script = textwrap.dedent(f"""
        import sys
        import numpy as np, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        from trainer import input_fn, manifest_io
        from trainer.loop import LoopConfig, TrainingLoop

        data = {str(image_dataset)!r}
        manifest = manifest_io.load_manifest(data)
        dataset = input_fn.image_dataset(data, manifest, "validation", 16, image_size=16, training=False)
        images, labels = next(iter(dataset))

        def build():
            keras.utils.set_random_seed(7)
            inputs = keras.Input((16, 16, 3), dtype="uint8")
            x = keras.layers.Flatten()(keras.layers.Rescaling(1 / 255)(inputs))
            return keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(8, activation="tanh")(x)))

        def one_step(strategy):
            per_replica = []
            def make(input_context, **_):
                n = input_context.get_per_replica_batch_size(16)
                per_replica.append(n)
                return tf.data.Dataset.from_tensor_slices((images, labels)).batch(n, drop_remainder=True).repeat()
            dataset = strategy.distribute_datasets_from_function(input_fn.dataset_fn(make, 16))
            config = LoopConfig({str(tmp_path)!r} + "/" + str(strategy.num_replicas_in_sync), 16, 1, 1, 1,
                                learning_rate=0.5, optimizer="sgd")
            loop = TrainingLoop(strategy, build, config)
            loss, _ = loop._train_steps(iter(dataset), tf.constant(1))
            return per_replica, float(loss), [w.numpy() for w in loop.model.weights]

        n1, loss1, w1 = one_step(tf.distribute.get_strategy())
        n2, loss2, w2 = one_step(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
        print("per-replica batch", n1, n2, "loss", loss1, loss2)
        assert n1 == [16] and n2 == [8], (n1, n2)
        assert abs(loss1 - loss2) < 1e-5, (loss1, loss2)
        for a, b in zip(w1, w2):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        assert any(np.abs(a).sum() > 0 for a in w1)
        print("OK")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
    )
    assert done.returncode == 0 and "OK" in done.stdout, done.stdout + done.stderr[-3000:]


# --- clear errors: a specific exception from the library, one readable line and exit 2 from the CLI


def run_cli(capsys, *argv) -> tuple[int, str]:
    code = train.main([str(a) for a in argv])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1, err
    return code, err[0]


def test_missing_manifest(tmp_path, capsys):
    with pytest.raises(ManifestNotFoundError):
        train.plan_job(args("--data", tmp_path, "--model_dir", tmp_path / "m"))
    code, line = run_cli(capsys, "--data", tmp_path, "--model_dir", tmp_path / "m")
    assert code == 2 and "manifest.json not found" in line


def test_rejected_dataset_is_refused(image_dataset, tmp_path, capsys):
    """A folder holding only manifest.rejected.json (an untrusted run) is never trained on, even
    though its shards are there."""
    data = tmp_path / "data"
    shutil.copytree(image_dataset, data)
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["rejected"] = ["the shards hold 9 records of split train, the job produced 10"]
    (data / "manifest.rejected.json").write_text(json.dumps(manifest))
    (data / "manifest.json").unlink()
    with pytest.raises(DatasetRejectedError, match="rejected run"):
        train.plan_job(args("--data", data, "--model_dir", tmp_path / "m"))
    code, line = run_cli(capsys, "--data", data, "--model_dir", tmp_path / "m")
    assert code == 2 and "hold 9 records of split train" in line


def test_incomplete_manifest(image_dataset, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(image_dataset, data)
    manifest = json.loads((data / "manifest.json").read_text())
    del manifest["splits"]
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IncompleteManifestError, match=r"manifest is malformed: \$: lacks 'splits'"):
        train.plan_job(args("--data", data, "--model_dir", tmp_path / "m"))
    code, line = run_cli(capsys, "--data", data, "--model_dir", tmp_path / "m")
    assert code == 2 and "manifest is malformed: $: lacks 'splits'" in line

    manifest = json.loads((image_dataset / "manifest.json").read_text())
    del manifest["image_keys"]["encoded"]
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IncompleteManifestError, match="'encoded'"):
        train.plan_job(args("--data", data, "--model_dir", tmp_path / "m"))


def test_label_the_data_lacks(tabular_dataset, tmp_path, capsys):
    with pytest.raises(MissingFeatureError):
        train.plan_job(
            args("--data", tabular_dataset, "--model_dir", tmp_path, "--label", "price", "--num_classes", "3")
        )
    code, line = run_cli(
        capsys, "--data", tabular_dataset, "--model_dir", tmp_path, "--label", "price", "--num_classes", "3"
    )
    assert code == 2 and "'price' is not a feature of this dataset" in line and "x1" in line


def test_batch_larger_than_the_training_split(image_dataset, tmp_path, capsys):
    records = json.loads((image_dataset / "manifest.json").read_text())["splits"]["train"]["records"]
    flags = ["--data", image_dataset, "--model_dir", tmp_path / "m", "--batch_size", records + 1, "--image_size", "16"]
    with pytest.raises(BatchSizeError):
        train.run(args(*flags))
    code, line = run_cli(capsys, *flags)
    assert code == 2 and f"larger than the 'train' split ({records} records)" in line
    assert not (tmp_path / "m").exists()  # refused before anything was written


def test_an_evaluation_split_smaller_than_a_batch_is_evaluated_whole(image_dataset, tmp_path):
    """Evaluation pads its batches (input_fn.padded_batches), so a batch larger than the split
    evaluates each of its records once: no full batch is needed."""
    manifest = json.loads((image_dataset / "manifest.json").read_text())["splits"]
    batch = manifest["validation"]["records"] + 7
    assert batch <= manifest["train"]["records"]
    flags = ["--data", image_dataset, "--model_dir", tmp_path / "m", "--batch_size", batch, "--image_size", "16"]
    outcome = train.run(args(*flags, "--steps", "1", "--no_export"))
    assert outcome.result.val_records == manifest["validation"]["records"]


def test_follows_latest_of_a_refresh_root(tmp_path, capsys):
    """A refresh publishes ROOT/<version>/ and ROOT/LATEST; the trainer given ROOT trains on that version."""
    from pipeline.cli import main as pipeline_main

    root = tmp_path / "datasets" / "shapes"
    assert pipeline_main(["refresh", "--input", str(REPO / "sample" / "images"), "--output", str(root)]) == 0
    version = (root / "LATEST").read_text().strip()
    model_dir = tmp_path / "model"
    assert (
        train.main(
            [
                "--data",
                str(root),
                "--model_dir",
                str(model_dir),
                "--steps",
                "2",
                "--batch_size",
                "16",
                "--image_size",
                "32",
            ]
        )
        == 0
    )
    assert json.loads((model_dir / "training_summary.json").read_text())["data"] == str(root / version)
    assert f"on {root / version} (" in capsys.readouterr().out


def test_the_manifests_label_and_classes_need_no_flags(tmp_path):
    """A dataset converted with --label (its manifest names the label_column and its classes, in
    label_map) trains with neither --label nor --num_classes, and its export names each logit."""
    from tests.trainer.conftest import IRIS_HEADER, SPECIES, args, convert_table, named_rows, separated_rows

    classes = SPECIES
    data = convert_table(tmp_path, IRIS_HEADER, named_rows(separated_rows(90)), "--label", "species")
    outcome = train.run(args("--data", data, "--model_dir", tmp_path / "m", "--batch_size", 16, "--steps", 2))
    assert (outcome.job.label, outcome.job.num_classes, outcome.job.classes) == ("species", 3, classes)
    assert (tmp_path / "m" / "export" / "labels.txt").read_text().split() == list(classes)
    assert json.loads((tmp_path / "m" / "model.json").read_text())["classes"] == list(classes)

    # --num_classes may repeat the manifest's number of classes.
    again = train.run(args("--data", data, "--model_dir", tmp_path / "m", "--num_classes", 3, "--steps", 3))
    assert again.result.restored_from and again.job.classes == classes

    # A manifest without a label_column (older conversions): --label and --num_classes; the class
    # ids name the logits.
    plain = convert_table(tmp_path / "plain", IRIS_HEADER, separated_rows(90))
    flags = ["--data", plain, "--model_dir", tmp_path / "p", "--label", "species", "--num_classes", 3]
    outcome = train.run(args(*flags, "--batch_size", 16, "--steps", 2))
    assert outcome.job.classes == ("0", "1", "2")
    assert (tmp_path / "p" / "export" / "labels.txt").read_text().split() == ["0", "1", "2"]
