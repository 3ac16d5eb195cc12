"""Every common mistake in a call of the trainer ends in one line that names its cause and its fix,
exit 2: `python -m trainer` run as a process, as a user runs it, on data the pipeline converted.
A mistake that can be known before training (from the flags, the manifest, the model directory's
model.json, the labels read before the first step) is stderr's only line: no traceback, no
TensorFlow start-up or warning lines before it. One found while training (a label of data that
changed under a resumed model) comes after the job's own log lines, and is the last line."""

from __future__ import annotations

import pathlib
import re
import shutil

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dataset_reader import read_split
from tests.subprocess_limits import run_trainer
from tests.trainer.conftest import IRIS_HEADER, SAMPLE, convert_table, named_rows, separated_rows
from trainer import input_fn, train
from trainer.errors import LabelError
from trainer.model_dir import SPEC_NAME

# The trainer's own log lines (train.main's logging format), which a run that started writes.
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO trainer[\w.]*: ")
SHORT = ["--batch_size", "16", "--steps", "2"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, pathlib.Path]:
    """The datasets of the mistakes, converted by the pipeline; and a model directory trained on one."""
    made = {}

    def table(name, header, rows, *flags):
        made[name] = convert_table(tmp_path_factory.mktemp(name), header, rows, *flags)

    table("five", ("a", "b", "y"), [[i / 7 % 1, i / 3 % 1, i % 5] for i in range(100)])
    table("negative", ("a", "b", "y"), [[i / 7 % 1, i / 3 % 1, i % 4 - 1] for i in range(100)])
    table("strings", ("a", "species"), [[i / 7 % 1, ("setosa", "versicolor", "virginica")[i % 3]] for i in range(60)])
    table("iris", IRIS_HEADER, separated_rows(150))
    table("train_only", IRIS_HEADER, separated_rows(60), "--splits", "train=1.0")
    table("named", IRIS_HEADER, named_rows(separated_rows(150)), "--label", "species")

    model_dir = tmp_path_factory.mktemp("models") / "iris"
    flags = ["--data", made["iris"], "--model_dir", model_dir, "--label", "species", "--num_classes", 3, *SHORT]
    assert train.main([str(f) for f in [*flags, "--no_export"]]) == 0
    made["iris_model"] = model_dir
    return made


# (case, flags given the datasets and a fresh model directory, what the line must say)
MISTAKES = [
    (
        "labels beyond --num_classes",
        lambda d, m: ["--data", d["five"], "--model_dir", m, "--label", "y", "--num_classes", 3],
        ["--num_classes 3 but label 'y' holds values up to 4 (split 'train'): give --num_classes 5"],
    ),
    (
        "a negative label",
        lambda d, m: ["--data", d["negative"], "--model_dir", m, "--label", "y", "--num_classes", 3],
        ["label 'y' holds -1 (split 'train')", "convert the data again with --label y", "class ids"],
    ),
    (
        "a string label column",
        lambda d, m: ["--data", d["strings"], "--model_dir", m, "--label", "species"],
        ["label column 'species' holds strings", "convert the data again with --label species", "class ids"],
    ),
    (
        "an int label without classes",
        lambda d, m: ["--data", d["five"], "--model_dir", m, "--label", "y"],
        ["label 'y' is int64 (classification): give the number of classes with --num_classes"],
    ),
    (
        "no label",
        lambda d, m: ["--data", d["five"], "--model_dir", m],
        ["name the target column with --label", "a, b, y"],
    ),
    (
        "--num_classes below the manifest's classes",
        lambda d, m: ["--data", d["named"], "--model_dir", m, "--num_classes", 2],
        [
            "--num_classes 2, but label 'species' has 3 classes (setosa, versicolor, virginica)",
            "leave --num_classes out",
        ],
    ),
    (
        "--num_classes above the manifest's classes",
        lambda d, m: ["--data", d["named"], "--model_dir", m, "--num_classes", 4],
        ["--num_classes 4, but label 'species' has 3 classes", "leave --num_classes out"],
    ),
    (
        "a model directory of another model",
        lambda d, m: ["--data", d["five"], "--model_dir", d["iris_model"], "--label", "y", "--num_classes", 5],
        [
            "--model_dir {iris_model} holds another model (its label 'species', this run's 'y'; "
            "its classes 3 (0, 1, 2)",
            "give another --model_dir, or remove {iris_model} to train this model from scratch",
        ],
    ),
    (
        "a model directory of the same data with other classes",
        lambda d, m: ["--data", d["iris"], "--model_dir", d["iris_model"], "--label", "species", "--num_classes", 4],
        ["--model_dir {iris_model} holds another model (its classes 3 (0, 1, 2), this run's 4 (0, 1, 2, 3))"],
    ),
    (
        "no split to evaluate on",
        lambda d, m: ["--data", d["train_only"], "--model_dir", m, "--label", "species", "--num_classes", 3],
        [
            "the dataset has no 'validation' or 'test' split to evaluate on (it has ['train']): "
            "name one with --eval_split"
        ],
    ),
]


@pytest.mark.parametrize("flags, says", [case[1:] for case in MISTAKES], ids=[case[0] for case in MISTAKES])
def test_a_mistake_in_the_call_is_one_line_naming_the_fix(data, tmp_path, flags, says):
    model_dir = tmp_path / "model"
    done = run_trainer([*flags(data, model_dir), *SHORT])
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]
    for part in says:
        assert part.format(**{k: str(v) for k, v in data.items()}) in lines[0], lines[0]
    assert not model_dir.exists()  # refused before anything was written


def _ends_in_one_line(done, *says):
    """Exit 2, and stderr the trainer's log lines, then one error line (no traceback, no
    TensorFlow lines)."""
    assert done.returncode == 2, done.stderr[-3000:]
    *before, last = done.stderr.splitlines()
    assert all(LOG_LINE.match(line) for line in before), done.stderr[-3000:]
    assert last.startswith("error: ") and all(part in last for part in says), last


def test_a_label_beyond_the_classes_found_while_training(data, tmp_path):
    """The data changed under a resumed model (a fresh run reads its labels first): labels are
    checked as they are read, on any device (a GPU or TPU would train on NaN, the CPU's loss
    fails naming no column)."""
    model_dir = tmp_path / "model"
    shutil.copytree(data["iris_model"], model_dir)
    rows = [[*row[:-1], 7 if i % 10 == 0 else row[-1]] for i, row in enumerate(separated_rows(150))]
    changed = convert_table(tmp_path / "changed_data", IRIS_HEADER, rows)
    flags = ["--data", changed, "--model_dir", model_dir, "--label", "species", "--num_classes", 3]
    done = run_trainer([*flags, "--batch_size", "16", "--epochs", "2"])
    _ends_in_one_line(done, "--num_classes 3 but label 'species' holds 7 (split ", "give --num_classes at least 8")


def test_checkpoints_of_another_model_without_a_record_of_it(data, tmp_path):
    """A model directory whose checkpoints have no model.json beside them: the restore refuses
    variables that do not match, in one line, without TensorFlow's lines about unrestored values."""
    model_dir = tmp_path / "model"
    shutil.copytree(data["iris_model"], model_dir)
    (model_dir / SPEC_NAME).unlink()
    done = run_trainer(["--data", data["five"], "--model_dir", model_dir, "--label", "y", "--num_classes", 5, *SHORT])
    _ends_in_one_line(done, f"--model_dir {model_dir} holds checkpoints of another model (", "give another --model_dir")


def test_image_folders_split_as_train_and_test_are_evaluated_on_test(tmp_path):
    """Without a validation split the test split is evaluated (the default --eval_split)."""
    from pipeline.cli import main as pipeline_main

    out = tmp_path / "shapes"
    assert (
        pipeline_main(["--input", str(SAMPLE / "images"), "--output", str(out), "--splits", "train=0.8,test=0.2"]) == 0
    )
    argv = ["--data", out, "--model_dir", tmp_path / "m", "--image_size", 16, *SHORT, "--no_export"]
    outcome = train.run(train.parser().parse_args([str(a) for a in argv]))
    assert outcome.job.eval_split == "test"
    assert outcome.result.val_records == len(read_split(out, "test"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    num_classes=st.integers(2, 8),
    inside=st.lists(st.integers(0, 99), min_size=30, max_size=50),
    outside=st.lists(st.integers(-3, 4), max_size=3),
)
def test_labels_are_checked_against_the_classes_before_training(tmp_path_factory, num_classes, inside, outside):
    """Generated label columns (class ids, and none to a few outside 0..K-1) and --num_classes K:
    refused before training exactly when a label of either split is not a class id, naming the
    split and the value; else the job starts."""
    labels = [v % num_classes for v in inside] + [v if v < 0 else num_classes + v for v in outside]
    rows = [[i / 7 % 1, label] for i, label in enumerate(labels)]
    data = convert_table(tmp_path_factory.mktemp("labels"), ("a", "y"), rows, "--splits", "train=0.5,validation=0.5")
    job = train.plan_job(
        train.parser().parse_args(
            ["--data", str(data), "--model_dir", "unused", "--label", "y"] + ["--num_classes", str(num_classes)]
        )
    )
    wrong = None
    for split in ("train", "validation"):
        held = [r["y"] for r in read_split(data, split)]
        if wrong is None and held and max(held) >= num_classes:
            wrong = (split, f"holds values up to {max(held)}", f"give --num_classes {max(held) + 1}")
        elif wrong is None and held and min(held) < 0:
            wrong = (split, f"holds {min(held)}", "class ids")
    if wrong is None:
        train.fresh_model(job)
        return
    with pytest.raises(LabelError) as e:
        train.fresh_model(job)
    split, *says = wrong
    assert f"(split '{split}')" in str(e.value) and all(part in str(e.value) for part in says), (str(e.value), wrong)


@settings(max_examples=60, deadline=None)
@given(labels=st.lists(st.integers(-3, 12), min_size=1, max_size=40), num_classes=st.integers(2, 10))
def test_every_batch_of_labels_is_checked_as_it_is_read(labels, num_classes):
    """input_fn.checked_labels, as the input pipeline runs it: an error exactly when a label is
    not a class id, naming the largest too large (else the smallest) in one line."""
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(labels, tf.int64)).batch(len(labels))
    checked = dataset.map(lambda y: input_fn.checked_labels(y, num_classes, "validation"))
    outside = [y for y in labels if not 0 <= y < num_classes]
    if not outside:
        assert list(next(iter(checked)).numpy()) == labels
        return
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        next(iter(checked))
    error = LabelError.from_op_error(e.value, "y", num_classes, given=True)
    value = max(labels) if max(labels) >= num_classes else min(labels)
    assert error is not None and f"label 'y' holds {value} (split 'validation')" in str(error), str(error)
    assert "\n" not in str(error)
