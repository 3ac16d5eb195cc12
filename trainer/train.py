"""Command line: train on a dataset the pipeline converted.

    python -m trainer --data DEST --model_dir DIR [--tpu NAME] [--epochs N | --steps N]
                      [--batch_size N] [--image_size N] [--architecture small_cnn|resnet50|...]
                      [--train_crop random|center|none] [--eval_crop center|none] [--no_flip]
                      [--label COLUMN --num_classes K]   (tabular datasets)
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
from trainer import input_fn, manifest_io
from trainer import model as models
from trainer.errors import BatchSizeError, ShardLengthError, TrainerError
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
    build_model: functools.partial
    make_dataset: functools.partial  # (split, training, batch_size, input_context) -> tf.data.Dataset
    classification: bool
    num_classes: int
    description: str


def plan_job(args: argparse.Namespace) -> Job:
    """Read the manifest and check the flags against it; raises TrainerError subclasses."""
    data = manifest_io.resolve_data(args.data)
    manifest = manifest_io.load_manifest(data)
    manifest_io.split_info(manifest, args.train_split)
    manifest_io.split_info(manifest, args.eval_split)
    if args.image_size <= 0:
        raise TrainerError(f"--image_size must be positive, got {args.image_size}")
    if manifest.kind == "csv":
        if not args.label:
            raise TrainerError(
                "tabular dataset: name the target column with --label "
                f"(features: {', '.join(sorted(manifest.features))})"
            )
        features = [f.strip() for f in args.features.split(",") if f.strip()] if args.features else None
        columns = input_fn.tabular_columns(manifest, args.label, features)
        classification = (
            args.task or ("classification" if manifest.features[args.label].dtype == "int64" else "regression")
        ) == "classification"
        if classification and manifest.features[args.label].dtype != "int64":
            raise TrainerError(
                f"label {args.label!r} is {manifest.features[args.label].dtype}: classification needs int64 class ids"
            )
        if classification and not args.num_classes:
            raise TrainerError(
                f"label {args.label!r} is int64 (classification): give the number of classes with --num_classes"
            )
        num_classes = args.num_classes if classification else 1
        if classification and num_classes < 2:
            raise TrainerError(f"--num_classes must be at least 2, got {num_classes}")
        specs = {name: manifest.features[name] for name in columns}
        return Job(
            data,
            manifest,
            functools.partial(models.tabular_model, specs, num_classes, args.string_buckets),
            functools.partial(
                input_fn.tabular_dataset,
                data,
                manifest,
                label=args.label,
                features=columns,
                string_buckets=args.string_buckets,
                shuffle_buffer=args.shuffle_buffer,
                seed=args.seed,
            ),
            classification,
            num_classes,
            f"dense model on {len(columns)} column(s), target {args.label!r} "
            + (f"({num_classes} classes)" if classification else "(regression)"),
        )
    if args.label:
        raise TrainerError(
            f"--label is for tabular datasets; this is an {manifest.kind!r} dataset "
            f"labelled by {manifest.image_keys.get('label')!r}"
        )
    manifest_io.image_feature_keys(manifest)
    num_classes = len(manifest.label_map)
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
    )


@dataclasses.dataclass
class Outcome:
    job: Job
    result: Result
    strategy: tf.distribute.Strategy
    loop: TrainingLoop
    policy: str


def run(args: argparse.Namespace, on_epoch=None) -> Outcome:
    """The whole job: plan, distribute, train (resuming), export. Returns what happened."""
    job = plan_job(args)
    check_tpu_paths(args.tpu, job.data, args.model_dir)
    strategy = make_strategy(args.tpu)
    replicas = strategy.num_replicas_in_sync
    if args.batch_size % replicas:
        raise BatchSizeError(f"global batch size {args.batch_size} is not divisible by the {replicas} replicas")
    steps_per_epoch = input_fn.check_batch_size(job.manifest, args.train_split, args.batch_size)
    eval_steps = input_fn.check_batch_size(job.manifest, args.eval_split, args.batch_size)
    total_steps = (
        args.steps if args.steps is not None else (args.epochs if args.epochs is not None else 10) * steps_per_epoch
    )
    if total_steps <= 0:
        raise TrainerError(f"nothing to train: --epochs/--steps must be positive (got {total_steps} steps)")
    policy = set_mixed_precision(args.mixed_precision, strategy)
    if args.seed is not None:
        keras.utils.set_random_seed(args.seed)
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

    train = strategy.distribute_datasets_from_function(
        input_fn.dataset_fn(job.make_dataset, args.batch_size, split=args.train_split, training=True)
    )
    evaluation = strategy.distribute_datasets_from_function(
        # Repeated so every pipeline always has `eval_steps` batches; each evaluation takes a fresh
        # iterator, so one pipeline reads the same records in the same order every time.
        input_fn.dataset_fn(job.make_dataset, args.batch_size, split=args.eval_split, training=False, repeat=True)
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
    loop = TrainingLoop(strategy, job.build_model, config)
    try:
        result = loop.fit(train, evaluation, on_epoch=on_epoch)
    except tf.errors.OpError as e:  # a shard's count check (input_fn.read_shard) is a mistake in the data
        damaged = ShardLengthError.from_op_error(e)
        if damaged is None:
            raise
        raise damaged from e
    if args.export:
        result.export_dir = loop.export(job.manifest.label_map)
    # Written last, so that it names what the run made (the export, or none with --no_export).
    loop.write_summary(
        {
            "data": job.data,
            "kind": job.manifest.kind,
            "model": job.description,
            "policy": policy,
            "replicas": replicas,
            "global_batch_size": args.batch_size,
            **dataclasses.asdict(result),
        }
    )
    return Outcome(job, result, strategy, loop, policy)


def summary_text(args, outcome: Outcome) -> str:
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
    lines.append(f"  {args.eval_split:<11} loss {result.val_loss:.4f}{acc}")
    lines.append(
        f"  checkpoints {manifest_io.join(args.model_dir, 'checkpoints')}, "
        f"TensorBoard logs {manifest_io.join(args.model_dir, 'logs')}"
        + (f", exported model {result.export_dir}" if result.export_dir else "")
    )
    return "\n".join(lines)


def _print_epoch(metrics: dict) -> None:
    parts = [f"epoch {metrics['epoch']}", f"step {metrics['step']}", f"loss {metrics['loss']:.4f}"]
    if "accuracy" in metrics:
        parts.append(f"accuracy {metrics['accuracy']:.3f}")
    parts.append(f"val_loss {metrics['val_loss']:.4f}")
    if "val_accuracy" in metrics:
        parts.append(f"val_accuracy {metrics['val_accuracy']:.3f}")
    parts.append(f"{metrics['examples_per_second']:.0f} examples/s")
    print("  ".join(parts), flush=True)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        outcome = run(args, on_epoch=_print_epoch)
    except TrainerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except tf.errors.OpError as e:  # unreadable data, a lost device, a full disk ...
        print(f"error: {type(e).__name__}: {e.message.splitlines()[0] if e.message else e}", file=sys.stderr)
        return 1
    except Exception as e:  # a bug, or a failure nobody foresaw: one line, as the pipeline's commands do
        if args.debug:
            raise
        first = (str(e).strip() or "(no message)").splitlines()[0]
        print(f"error: {type(e).__name__}: {first} (--debug for the traceback)", file=sys.stderr)
        return EXIT_UNEXPECTED
    print(summary_text(args, outcome))
    return 0
