"""The distributed training loop: a custom loop in the style of the TPU reference models.

* Each replica computes its per-example losses and averages them over the *global* batch
  (`tf.nn.compute_average_loss`), so the all-reduced (summed) gradients are those of the global
  mean loss, whatever the number of replicas.
* Several steps run inside one `tf.function` call (`steps_per_loop`), which keeps a TPU busy
  instead of returning to Python after every step.
* Checkpoints (model, optimizer, step) go to MODEL_DIR/checkpoints at the end of every epoch (and
  every `checkpoint_steps` steps if set); a restarted job restores the latest one and carries on
  from its step. TensorBoard logs go to MODEL_DIR/logs/{train,validation}; the trained model is
  exported (SavedModel, for inference) to MODEL_DIR/export.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

_LOG = logging.getLogger(__name__)
_SUM = tf.distribute.ReduceOp.SUM
# What tensorboard.summary.scalar writes, without needing the tensorboard package installed.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
)


def scalar_summary(name: str, value: float, step: int) -> None:
    """A TensorBoard scalar in the default summary writer."""
    tf.summary.write(name, tf.constant(value, tf.float32), step=step, metadata=_SCALAR_METADATA)


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    model_dir: str
    global_batch_size: int
    steps_per_epoch: int
    total_steps: int
    eval_steps: int
    classification: bool = True  # False: regression (mean squared error)
    learning_rate: float = 1e-3
    optimizer: str = "adam"  # or "sgd" (momentum 0.9)
    schedule: str = "constant"  # or "cosine": cosine decay of the learning rate to 0 at total_steps
    steps_per_loop: int = 50
    checkpoint_steps: int = 0  # 0: checkpoint at the end of each epoch only
    loss_scale: bool = False  # float16 mixed precision: dynamic loss scaling
    max_checkpoints: int = 3


@dataclasses.dataclass
class Result:
    step: int = 0
    start_step: int = 0
    restored_from: str | None = None
    train_loss: float | None = None
    train_accuracy: float | None = None
    val_loss: float | None = None
    val_accuracy: float | None = None
    examples_per_second: float | None = None
    seconds: float = 0.0
    export_dir: str | None = None
    history: list = dataclasses.field(default_factory=list)


def _per_example_loss(classification: bool):
    if classification:
        return lambda labels, logits: keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return lambda labels, logits: tf.square(tf.cast(labels, tf.float32) - logits)


def _correct(classification: bool, labels, logits):
    if not classification:
        return tf.constant(0, tf.int64)
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.reduce_sum(tf.cast(tf.equal(predicted, tf.cast(labels, tf.int32)), tf.int64))


OPTIMIZERS = ("adam", "sgd")


SCHEDULES = ("constant", "cosine")


def make_optimizer(name: str, learning_rate) -> keras.optimizers.Optimizer:
    if name == "adam":
        return keras.optimizers.Adam(learning_rate)
    if name == "sgd":
        return keras.optimizers.SGD(learning_rate, momentum=0.9)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


class TrainingLoop:
    """Owns the model, optimizer and checkpoint of one training job under a strategy."""

    def __init__(self, strategy: tf.distribute.Strategy, build_model: Callable[[], keras.Model], config: LoopConfig):
        self.strategy, self.config = strategy, config
        with strategy.scope():
            self.model = build_model()
            learning_rate = config.learning_rate
            if config.schedule == "cosine":
                learning_rate = keras.optimizers.schedules.CosineDecay(
                    learning_rate, decay_steps=max(1, config.total_steps)
                )
            optimizer = make_optimizer(config.optimizer, learning_rate)
            if config.loss_scale:
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(self.model.trainable_variables)  # so a restore finds every slot variable
            self.optimizer = optimizer
            self.step = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                name="global_step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            tf.io.gfile.join(config.model_dir, "checkpoints"),
            max_to_keep=config.max_checkpoints,
            step_counter=self.step,
        )
        self._loss = _per_example_loss(config.classification)
        self._train_steps = tf.function(self._train_steps_fn)
        self._eval_steps = tf.function(self._eval_steps_fn)

    # ---- compiled parts ------------------------------------------------------------------

    def _train_step(self, features, labels):
        model, optimizer = self.model, self.optimizer
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            loss = tf.nn.compute_average_loss(
                self._loss(labels, logits), global_batch_size=self.config.global_batch_size
            )
            if model.losses:  # weight regularisation, spread over the replicas
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss, _correct(self.config.classification, labels, logits)

    def _train_steps_fn(self, iterator, steps):
        totals = self._summed_steps(self._train_step, iterator, steps)
        self.step.assign_add(tf.cast(steps, tf.int64))
        return totals

    def _eval_step(self, features, labels):
        logits = self.model(features, training=False)
        loss = tf.nn.compute_average_loss(self._loss(labels, logits), global_batch_size=self.config.global_batch_size)
        return loss, _correct(self.config.classification, labels, logits)

    def _eval_steps_fn(self, iterator, steps):
        return self._summed_steps(self._eval_step, iterator, steps)

    def _summed_steps(self, step_fn, iterator, steps):
        """Runs `steps` replicated steps; returns (summed loss, correct predictions) over replicas."""
        loss_sum, correct = tf.constant(0.0), tf.constant(0, tf.int64)
        for _ in tf.range(steps):
            loss, right = self.strategy.run(step_fn, args=next(iterator))
            loss_sum += self.strategy.reduce(_SUM, loss, axis=None)
            correct += self.strategy.reduce(_SUM, right, axis=None)
        return loss_sum, correct

    # ---- driver ----------------------------------------------------------------------------

    def restore(self) -> str | None:
        """Restore the latest checkpoint in MODEL_DIR/checkpoints, if any; returns its path."""
        path = self.manager.latest_checkpoint
        if path:
            self.checkpoint.restore(path).assert_existing_objects_matched()
            _LOG.info("resumed from %s at step %d", path, int(self.step.numpy()))
        return path

    def evaluate(self, eval_dataset: tf.distribute.DistributedDataset) -> tuple[float, float | None]:
        """(mean loss, accuracy) over `eval_steps` batches of a fresh pass of the validation data."""
        steps = self.config.eval_steps
        loss_sum, correct = self._eval_steps(iter(eval_dataset), tf.constant(steps))
        accuracy = float(correct) / (steps * self.config.global_batch_size) if self.config.classification else None
        return float(loss_sum) / steps, accuracy

    def fit(self, train_dataset, eval_dataset, on_epoch: Callable[[dict], None] | None = None) -> Result:
        c = self.config
        result = Result(restored_from=self.restore())
        result.start_step = step = int(self.step.numpy())
        if step >= c.total_steps:
            _LOG.info("already trained to step %d (target %d): nothing to train", step, c.total_steps)
        writers = {
            name: tf.summary.create_file_writer(tf.io.gfile.join(c.model_dir, f"logs/{name}"))
            for name in ("train", "validation")
        }
        iterator = iter(train_dataset) if step < c.total_steps else None
        started = time.monotonic()
        trained_examples, train_seconds, last_saved = 0, 0.0, step
        while step < c.total_steps:
            epoch = step // c.steps_per_epoch
            epoch_end = min((epoch + 1) * c.steps_per_epoch, c.total_steps)
            loss_sum, correct, done, epoch_started = 0.0, 0, 0, time.monotonic()
            while step < epoch_end:
                n = min(c.steps_per_loop, epoch_end - step)
                loop_loss, loop_correct = self._train_steps(iterator, tf.constant(n))
                loss_sum, correct, done, step = (
                    loss_sum + float(loop_loss),
                    correct + int(loop_correct),
                    done + n,
                    step + n,
                )
                _LOG.info("epoch %d step %d/%d: loss %.4f", epoch + 1, step, c.total_steps, loss_sum / done)
                if c.checkpoint_steps and step - last_saved >= c.checkpoint_steps and step < epoch_end:
                    self.manager.save(checkpoint_number=step)
                    last_saved = step
            seconds = time.monotonic() - epoch_started
            trained_examples += done * c.global_batch_size
            train_seconds += seconds
            metrics = {
                "epoch": epoch + 1,
                "step": step,
                "loss": loss_sum / done,
                "examples_per_second": done * c.global_batch_size / seconds,
            }
            if c.classification:
                metrics["accuracy"] = correct / (done * c.global_batch_size)
            metrics["val_loss"], val_accuracy = self.evaluate(eval_dataset)
            if val_accuracy is not None:
                metrics["val_accuracy"] = val_accuracy
            self._summaries(writers, metrics)
            self.manager.save(checkpoint_number=step)
            last_saved = step
            result.history.append(metrics)
            if on_epoch:
                on_epoch(metrics)
        if not result.history:  # nothing trained in this run: still report where the model stands
            result.val_loss, result.val_accuracy = self.evaluate(eval_dataset)
        else:
            last = result.history[-1]
            result.train_loss, result.train_accuracy = last["loss"], last.get("accuracy")
            result.val_loss, result.val_accuracy = last["val_loss"], last.get("val_accuracy")
            result.examples_per_second = trained_examples / train_seconds
        for writer in writers.values():
            writer.close()
        result.step, result.seconds = step, time.monotonic() - started
        return result

    @staticmethod
    def _summaries(writers, metrics):
        step = metrics["step"]
        with writers["train"].as_default():
            scalar_summary("loss", metrics["loss"], step)
            scalar_summary("examples_per_second", metrics["examples_per_second"], step)
            if "accuracy" in metrics:
                scalar_summary("accuracy", metrics["accuracy"], step)
        with writers["validation"].as_default():
            scalar_summary("loss", metrics["val_loss"], step)
            if "val_accuracy" in metrics:
                scalar_summary("accuracy", metrics["val_accuracy"], step)
        for writer in writers.values():
            writer.flush()

    def export(self, labels: tuple[str, ...] = (), summary: dict | None = None) -> str:
        """The model as a SavedModel (serving signature `serve`) in MODEL_DIR/export, with the
        class names in labels.txt and the run's summary in MODEL_DIR/training_summary.json."""
        path = tf.io.gfile.join(self.config.model_dir, "export")
        if tf.io.gfile.exists(path):
            tf.io.gfile.rmtree(path)  # a rerun replaces the previous export
        self.model.export(path, format="tf_saved_model", verbose=False)
        if labels:
            with tf.io.gfile.GFile(tf.io.gfile.join(path, "labels.txt"), "w") as f:
                f.write("\n".join(labels) + "\n")
        if summary is not None:
            with tf.io.gfile.GFile(tf.io.gfile.join(self.config.model_dir, "training_summary.json"), "w") as f:
                f.write(json.dumps(summary, indent=2, sort_keys=True, default=str))
        _LOG.info("exported the model to %s", path)
        return path
