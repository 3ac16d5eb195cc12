"""Command line: train on a dataset the pipeline converted.

    python -m trainer --data DEST --model_dir DIR [--tpu NAME] [--epochs N | --steps N]
                      [--batch_size N] [--image_size N] [--architecture small_cnn|resnet50|...]
                      [--train_crop random|center|none] [--eval_crop center|none] [--no_flip]
                      [--label COLUMN] [--num_classes K]   (tabular datasets)
                      [--mixed_precision]

DEST and DIR are local folders or gs:// prefixes. The job reads DEST/manifest.json for the shard
files, record counts, feature spec and label map; it checkpoints to DIR/checkpoints (and resumes
from there when restarted), logs to DIR/logs (TensorBoard) and exports to DIR/export.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import sys

import keras
import tensorflow as tf

from core.contract.manifest import Manifest
from core.shown import printing, show
from trainer import data_statistics, input_fn, manifest_io, model_dir
from trainer import model as models
from trainer.errors import BatchSizeError, LabelError, ShardLengthError, TrainerError, op_error_cause
from trainer.flags import parser
from trainer.loop import LoopConfig, Result, TrainingLoop
from trainer.strategy import check_tpu_paths, make_strategy, set_mixed_precision

_LOG = logging.getLogger("trainer")
# Exit codes: 0 trained; 1 TensorFlow failed on the data or a device; 2 a mistake in the flags or the
# data (TrainerError); 3 an unexpected error (one line; --debug shows its traceback), as `python -m pipeline`.
EXIT_UNEXPECTED = 3


@dataclasses.dataclass(frozen=True)
class Job:
    """What the flags and the manifest decide, before any device work."""

    data: str  # the dataset folder (a refresh ROOT resolved through its LATEST)
    manifest: Manifest
    build_model: functools.partial  # tabular: takes the columns' `statistics` for a fresh model
    make_dataset: functools.partial  # (split, training, batch_size, input_context) -> tf.data.Dataset
    classification: bool
    num_classes: int
    description: str
    train_split: str
    eval_split: str
    label: str  # the feature the targets are in
    classes: tuple[str, ...]  # the name of each logit (labels.txt); () for regression
    classes_given: bool  # by --num_classes (else by the manifest's label_map)
    spec: dict  # what the model is built for (trainer.model_dir)
    numeric_columns: tuple[str, ...] | None = None  # tabular: the columns standardised; None for images


def plan_job(args: argparse.Namespace) -> Job:
    """Read the manifest and check the flags against it; raises TrainerError subclasses."""
    data = manifest_io.resolve_data(args.data)
    manifest = manifest_io.load_manifest(data, inside=args.data)
    manifest_io.split_info(manifest, args.train_split)
    eval_split = manifest_io.eval_split(manifest, args.eval_split)
    manifest_io.split_info(manifest, eval_split)
    if args.image_size <= 0:
        raise TrainerError(f"--image_size must be positive, got {args.image_size}")
    splits = {"train_split": args.train_split, "eval_split": eval_split}
    if manifest.kind == "csv":
        return _tabular_job(args, data, manifest, splits)
    if args.label:
        raise TrainerError(
            f"--label is for tabular datasets; this is an {manifest.kind!r} dataset "
            f"labelled by {manifest.image_keys.get('label')!r}"
        )
    _, label_key = manifest_io.image_feature_keys(manifest)
    classes = manifest.label_map
    _check_num_classes(args.num_classes, label_key, classes)
    _warn_if_scaled_up(manifest, args.image_size)
    num_classes = len(classes)
    return Job(
        data,
        manifest,
        functools.partial(models.image_model, args.architecture, args.image_size, num_classes),
        functools.partial(
            input_fn.image_dataset,
            data,
            manifest,
            image_size=args.image_size,
            shuffle_buffer=args.shuffle_buffer,
            seed=args.seed,
            augmentation=input_fn.Augmentation(train_crop=args.train_crop, eval_crop=args.eval_crop, flip=args.flip),
        ),
        True,
        num_classes,
        f"{args.architecture} at {args.image_size}x{args.image_size} px, {num_classes} classes",
        label=label_key,
        classes=classes,
        classes_given=False,
        spec={"model": args.architecture, "task": "classification", "label": label_key, "classes": list(classes)},
        **splits,
    )


def _warn_if_scaled_up(manifest: Manifest, image_size: int) -> None:
    """A warning where --image_size is larger than every stored image's shorter side (the
    conversion's image.resize): the model then trains on pixels made up by upscaling."""
    bound = manifest_io.stored_images(manifest).max_short_side
    if bound is not None and image_size > bound:
        _LOG.warning(
            "--image_size %d is larger than this dataset's images: they were stored with no shorter side over "
            "%d px (its conversion's image.resize), so every one is scaled up; to train at %d px, convert with "
            "a bound of at least %d",
            image_size,
            bound,
            image_size,
            image_size,
        )


def _tabular_job(args: argparse.Namespace, data: str, manifest: Manifest, splits: dict) -> Job:
    """The job on a tabular dataset: the label (--label, else the manifest's label_column), its
    classes (the manifest's label_map for its label_column, else --num_classes) and the columns."""
    label = args.label or manifest.label_column
    if not label:
        raise TrainerError(
            f"tabular dataset: name the target column with --label (features: {', '.join(sorted(manifest.features))})"
        )
    features = [f.strip() for f in args.features.split(",") if f.strip()] if args.features else None
    columns = input_fn.tabular_columns(manifest, label, features)
    dtype = manifest.features[label].dtype
    task = args.task or ("classification" if dtype == "int64" else "regression")
    classification = task == "classification"
    known = manifest.label_map if label == manifest.label_column else ()
    if classification and dtype != "int64":
        raise TrainerError(f"label {label!r} is {dtype}: classification needs int64 class ids")
    if not classification:
        classes = ()
    elif known:
        _check_num_classes(args.num_classes, label, known)
        classes = known
    elif not args.num_classes:
        raise TrainerError(
            f"label {label!r} is int64 (classification): give the number of classes with --num_classes "
            f"(or convert the data with --label {label}, which records its classes in the manifest)"
        )
    elif args.num_classes < 2:
        raise TrainerError(f"--num_classes must be at least 2, got {args.num_classes}")
    else:
        classes = tuple(str(i) for i in range(args.num_classes))  # the class ids name themselves
    num_classes = len(classes) if classification else 1
    specs = {name: manifest.features[name] for name in columns}
    spec = {
        "model": "tabular_dense",
        "task": task,
        "label": label,
        "classes": list(classes),
        "features": [f"{name}: {s.dtype}" for name, s in specs.items()],  # in the model's order
    }
    if any(s.dtype == "string" for s in specs.values()):
        spec["string_buckets"] = args.string_buckets
    return Job(
        data,
        manifest,
        functools.partial(models.tabular_model, specs, num_classes, args.string_buckets),
        functools.partial(
            input_fn.tabular_dataset,
            data,
            manifest,
            label=label,
            features=columns,
            string_buckets=args.string_buckets,
            num_classes=num_classes if classification else None,
            shuffle_buffer=args.shuffle_buffer,
            seed=args.seed,
        ),
        classification,
        num_classes,
        f"dense model on {len(columns)} column(s), target {label!r} "
        + (f"({num_classes} classes)" if classification else "(regression)"),
        label=label,
        classes=classes,
        classes_given=classification and not known,
        spec=spec,
        numeric_columns=tuple(models.numeric_columns(specs)),
        **splits,
    )


def _check_num_classes(given: int | None, label: str, classes: tuple[str, ...]) -> None:
    """--num_classes, where the manifest lists the classes, may only repeat their number: fewer
    would leave classes of the data without a logit, more would add logits that labels.txt cannot
    name and no record trains."""
    if given is not None and given != len(classes):
        names = ", ".join(classes) if len(", ".join(classes)) <= 60 else ", ".join(classes)[:57] + "..."
        raise TrainerError(
            f"--num_classes {given}, but label {label!r} has {len(classes)} classes ({names}) in the manifest's "
            "label_map: leave --num_classes out"
        )


def fresh_model(job: Job) -> tuple[functools.partial, data_statistics.ColumnStatistics | None]:
    """The model builder of a run that starts afresh: for a tabular model, with the statistics of
    the training split's number columns (trainer.data_statistics), read once now and kept in the
    model's weights. Also checks the labels of both splits against the classes (LabelError) while
    it reads them, before a step is trained; a resumed run does neither (its checkpoint holds the
    statistics, and input_fn checks every label as it is read)."""
    if job.numeric_columns is None:
        return job.build_model, None
    label = job.label if job.classification else None
    train = data_statistics.column_statistics(job.data, job.manifest, job.train_split, job.numeric_columns, label)
    if label:
        _check_labels(job, train, job.train_split)
        _check_labels(
            job, data_statistics.column_statistics(job.data, job.manifest, job.eval_split, (), label), job.eval_split
        )
    return functools.partial(job.build_model, statistics=(train.mean, train.variance)), train


def _check_labels(job: Job, read: data_statistics.ColumnStatistics, split: str) -> None:
    for value in (read.label_max, read.label_min):
        if value is not None and not 0 <= value < job.num_classes:
            raise LabelError.out_of_range(job.label, value, split, job.num_classes, job.classes_given, read.complete)


@dataclasses.dataclass
class Outcome:
    job: Job
    result: Result
    strategy: tf.distribute.Strategy
    loop: TrainingLoop
    policy: str


def run(args: argparse.Namespace, on_epoch=None) -> Outcome:
    """The whole job: plan, distribute, train (resuming), export. Returns what happened. Every
    mistake found before training (in the flags, the data, the model directory) is raised before
    anything is logged or written."""
    job = plan_job(args)
    steps_per_epoch = input_fn.check_batch_size(job.manifest, job.train_split, args.batch_size)
    total_steps = (
        args.steps if args.steps is not None else (args.epochs if args.epochs is not None else 10) * steps_per_epoch
    )
    if total_steps <= 0:
        raise TrainerError(f"nothing to train: --epochs/--steps must be positive (got {total_steps} steps)")
    build_model, read = job.build_model, None
    if model_dir.check(args.model_dir, job.spec) is None:
        build_model, read = fresh_model(job)
        noted = {"image_size": args.image_size} if job.numeric_columns is None else {}
        model_dir.record(args.model_dir, job.spec, data=job.data, **noted)
    manifest_io.log_dataset(args.data, job.data, job.manifest)
    if read is not None:
        _LOG.info("number columns standardised with the mean and variance of %d training records", read.records)
    check_tpu_paths(args.tpu, job.data, args.model_dir)
    strategy = make_strategy(args.tpu)
    replicas = strategy.num_replicas_in_sync
    if args.batch_size % replicas:
        raise BatchSizeError(f"global batch size {args.batch_size} is not divisible by the {replicas} replicas")
    policy = set_mixed_precision(args.mixed_precision, strategy)
    if args.seed is not None:
        keras.utils.set_random_seed(args.seed)

    train = strategy.distribute_datasets_from_function(
        input_fn.dataset_fn(job.make_dataset, args.batch_size, split=job.train_split, training=True)
    )
    # Every record of the evaluation split, in batches padded to the same steps on every replica;
    # each evaluation takes a fresh iterator, so it reads the same records in the same order.
    evaluate = input_fn.dataset_fn(job.make_dataset, args.batch_size, split=job.eval_split, training=False, padded=True)
    evaluation = strategy.distribute_datasets_from_function(evaluate)  # calls `evaluate` for its pipelines
    eval_steps = input_fn.evaluation_steps(
        job.manifest, job.eval_split, args.batch_size // replicas, evaluate.contexts[0]
    )
    _LOG.info(
        "%s; %s, %d replica(s), global batch %d, policy %s; %d steps per epoch, %d eval steps",
        job.description,
        type(strategy).__name__,
        replicas,
        args.batch_size,
        policy,
        steps_per_epoch,
        eval_steps,
    )
    config = LoopConfig(
        model_dir=args.model_dir,
        global_batch_size=args.batch_size,
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        eval_steps=eval_steps,
        classification=job.classification,
        learning_rate=args.learning_rate,
        optimizer=args.optimizer,
        schedule=args.schedule,
        steps_per_loop=max(1, args.steps_per_loop),
        log_every_seconds=args.log_every_seconds,
        checkpoint_steps=args.checkpoint_steps,
        loss_scale=policy == "mixed_float16",
    )
    loop = TrainingLoop(strategy, build_model, config)
    try:
        result = loop.fit(train, evaluation, on_epoch=on_epoch)
    except tf.errors.OpError as e:  # the input's checks of shards and labels are mistakes in the data or call
        mistake = ShardLengthError.from_op_error(e) or LabelError.from_op_error(
            e, job.label, job.num_classes, job.classes_given
        )
        if mistake is None:
            raise
        raise mistake from e
    if args.export:
        result.export_dir = loop.export(job.classes)
    # Written last, so that it names what the run made (the export, or none with --no_export).
    loop.write_summary(
        {
            "data": job.data,
            "kind": job.manifest.kind,
            "model": job.description,
            "eval_split": job.eval_split,
            "policy": policy,
            "replicas": replicas,
            "global_batch_size": args.batch_size,
            **dataclasses.asdict(result),
        }
    )
    return Outcome(job, result, strategy, loop, policy)


def summary_lines(args, outcome: Outcome) -> list[str]:
    job, result, strategy = outcome.job, outcome.result, outcome.strategy
    lines = [
        f"Trained {job.description} on {job.data} ({type(strategy).__name__}, "
        f"{strategy.num_replicas_in_sync} replica(s), global batch {args.batch_size}, {outcome.policy})"
    ]
    resumed = f", resumed from {result.restored_from}" if result.restored_from else ""
    speed = f", {result.examples_per_second:.0f} examples/s" if result.examples_per_second else ""
    lines.append(f"  steps {result.start_step} -> {result.step}{resumed}; {result.seconds:.1f} s{speed}")
    if result.train_loss is not None:
        acc = f", accuracy {result.train_accuracy:.3f}" if result.train_accuracy is not None else ""
        lines.append(f"  train       loss {result.train_loss:.4f}{acc}")
    acc = f", accuracy {result.val_accuracy:.3f}" if result.val_accuracy is not None else ""
    lines.append(f"  {job.eval_split:<11} loss {result.val_loss:.4f}{acc} ({result.val_records} records)")
    lines.append(
        f"  checkpoints {manifest_io.join(args.model_dir, 'checkpoints')}, "
        f"TensorBoard logs {manifest_io.join(args.model_dir, 'logs')}"
        + (f", exported model {result.export_dir}" if result.export_dir else "")
    )
    return lines


def _print_epoch(metrics: dict) -> None:
    parts = [f"epoch {metrics['epoch']}", f"step {metrics['step']}", f"loss {metrics['loss']:.4f}"]
    if "accuracy" in metrics:
        parts.append(f"accuracy {metrics['accuracy']:.3f}")
    parts.append(f"val_loss {metrics['val_loss']:.4f}")
    if "val_accuracy" in metrics:
        parts.append(f"val_accuracy {metrics['val_accuracy']:.3f}")
    parts.append(f"val_records {metrics['val_records']}")
    parts.append(f"{metrics['examples_per_second']:.0f} examples/s")
    show("  ".join(parts))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, handlers=[printing(logging.StreamHandler(sys.stderr))])
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        outcome = run(args, on_epoch=_print_epoch)
    except TrainerError as e:
        show(f"error: {e}", file=sys.stderr)
        return 2
    except tf.errors.OpError as e:  # unreadable data, a lost device, a full disk ...
        show(f"error: {type(e).__name__}: {op_error_cause(e)}", file=sys.stderr)
        return 1
    except Exception as e:  # a bug, or a failure nobody foresaw: one line, as the pipeline's commands do
        if args.debug:
            raise
        first = (str(e).strip() or "(no message)").splitlines()[0]
        show(f"error: {type(e).__name__}: {first} (--debug for the traceback)", file=sys.stderr)
        return EXIT_UNEXPECTED
    show(*summary_lines(args, outcome))
    return 0
