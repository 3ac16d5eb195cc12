"""The distributed training loop: a custom loop in the style of the TPU reference models.

* Each replica computes its per-example losses and averages them over the *global* batch
  (`tf.nn.compute_average_loss`), so the all-reduced (summed) gradients are those of the global
  mean loss, whatever the number of replicas.
* Several steps run inside one `tf.function` call (`steps_per_loop`), which keeps a TPU busy
  instead of returning to Python after every step.
* Progress is logged from the first step on (a call of one step), then every
  `log_every_seconds`: a loop call runs up to `steps_per_loop` steps, fewer where a line is due
  sooner (ProgressLines).
* Checkpoints (model, optimizer, step) go to MODEL_DIR/checkpoints at the end of every epoch (and
  every `checkpoint_steps` steps if set); a restarted job restores the latest one and carries on
  from its step; checkpoints of another model are refused in one line (ModelDirError).
  TensorBoard logs go to MODEL_DIR/logs/{train,validation}; the trained model is exported
  (SavedModel, for inference) to MODEL_DIR/export.
* Evaluation covers every record of its split: its batches come padded with zero-weight elements
  (input_fn.padded_batches), and loss and accuracy are sums over the weighted records, divided by
  their count, which every result reports (`val_records`).
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

from trainer.errors import ModelDirError
from trainer.flags import OPTIMIZERS

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
    eval_steps: int  # of a padded evaluation (input_fn.evaluation_steps): every record of the split
    classification: bool = True  # False: regression (mean squared error)
    learning_rate: float = 1e-3
    optimizer: str = "adam"  # or "sgd" (momentum 0.9)
    schedule: str = "constant"  # or "cosine": cosine decay of the learning rate to 0 at total_steps
    steps_per_loop: int = 50  # the most; fewer where a progress line is due sooner
    log_every_seconds: float = 30.0  # between two progress lines (ProgressLines)
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
    val_records: int = 0  # the records evaluated: every record of the evaluation split
    examples_per_second: float | None = None
    seconds: float = 0.0
    export_dir: str | None = None
    history: list = dataclasses.field(default_factory=list)


def _per_example_loss(classification: bool):
    if classification:
        return lambda labels, logits: keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return lambda labels, logits: tf.square(tf.cast(labels, tf.float32) - logits)


def _correct(classification: bool, labels, logits, weights=None):
    """Right predictions (of the records whose weight is not 0, where weights are given)."""
    if not classification:
        return tf.constant(0, tf.int64)
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    right = tf.equal(predicted, tf.cast(labels, tf.int32))
    if weights is not None:
        right = tf.logical_and(right, weights > 0)
    return tf.reduce_sum(tf.cast(right, tf.int64))


def make_optimizer(name: str, learning_rate) -> keras.optimizers.Optimizer:
    if name == "adam":
        return keras.optimizers.Adam(learning_rate)
    if name == "sgd":
        return keras.optimizers.SGD(learning_rate, momentum=0.9)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


def duration(seconds: float) -> str:
    """'32 s', '4 min 10 s', '2 h 5 min'."""
    seconds = max(1, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds // 60 % 60} min"


class ProgressLines:
    """The training's progress in log lines: one once the first step is done (it includes tracing
    and compiling: its time says how long start-up took), then one every `log_every_seconds`, such
    as `step 1,200 of 15,000, epoch 2 of 10: 8% done, 76,800 examples, 2,150 examples/s, loss
    0.8123, about 6 min 25 s left`. The rate is the training's since the line before (what the steps
    themselves took); the loss the mean of those steps; the time left is at the pace the run has
    kept since its first step, evaluations and checkpoints included."""

    def __init__(self, config: LoopConfig, step: int):
        self._config = config
        self._epochs = -(-config.total_steps // config.steps_per_epoch)
        self._started = self._due = time.monotonic()
        self._first: tuple[int, float] | None = None  # (step, time) once the first call is done
        self._step_seconds = 0.0  # one step's time in the last call
        self._steps, self._loss, self._seconds = 0, 0.0, 0.0  # since the last line

    def steps(self, at_most: int) -> int:
        """The steps the next loop call may run: 1 for the first, then as many as end about when the
        next line is due (at least 1, at most `at_most`)."""
        if self._first is None:
            return 1
        due = self._due - time.monotonic()
        return max(1, min(at_most, int(due / self._step_seconds) if self._step_seconds else at_most))

    def trained(self, steps: int, loss_sum: float, seconds: float, step: int, epoch: int) -> None:
        """A loop call of `steps` steps, summing `loss_sum`, took `seconds`; the run is at `step`,
        in `epoch` (from 0)."""
        self._step_seconds = seconds / steps
        self._steps, self._loss, self._seconds = self._steps + steps, self._loss + loss_sum, self._seconds + seconds
        now = time.monotonic()
        if self._first is None:
            self._first = (step, now)
            line = f"first step done in {duration(now - self._started)} (with tracing), loss {loss_sum / steps:.4f}"
        elif now >= self._due:
            line = self._line(step, now)
        else:
            return
        c = self._config
        _LOG.info("step %s of %s, epoch %d of %d: %s", f"{step:,}", f"{c.total_steps:,}", epoch + 1, self._epochs, line)
        self._steps, self._loss, self._seconds = 0, 0.0, 0.0
        self._due = now + c.log_every_seconds

    def _line(self, step: int, now: float) -> str:
        c = self._config
        first_step, first_time = self._first
        left = (c.total_steps - step) * (now - first_time) / (step - first_step)
        rate = self._steps * c.global_batch_size / self._seconds if self._seconds else 0.0
        return (
            f"{100 * step // c.total_steps}% done, {step * c.global_batch_size:,} examples, {rate:,.0f} examples/s, "
            f"loss {self._loss / self._steps:.4f}" + (f", about {duration(left)} left" if step < c.total_steps else "")
        )


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

    def _eval_step(self, features, labels, weights):
        """(summed loss, right predictions, records) of a padded batch: the filling weighs 0."""
        logits = self.model(features, training=False)
        loss = tf.reduce_sum(self._loss(labels, logits) * weights)
        records = tf.reduce_sum(tf.cast(weights > 0, tf.int64))
        return loss, _correct(self.config.classification, labels, logits, weights), records

    def _eval_steps_fn(self, iterator, steps):
        loss_sum, correct, records = tf.constant(0.0), tf.constant(0, tf.int64), tf.constant(0, tf.int64)
        for _ in tf.range(steps):
            loss, right, seen = self.strategy.run(self._eval_step, args=next(iterator))
            loss_sum += self.strategy.reduce(_SUM, loss, axis=None)
            correct += self.strategy.reduce(_SUM, right, axis=None)
            records += self.strategy.reduce(_SUM, seen, axis=None)
        return loss_sum, correct, records

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
        """Restore the latest checkpoint in MODEL_DIR/checkpoints, if any; returns its path.
        Checkpoints whose variables are not this model's raise ModelDirError (one line)."""
        path = self.manager.latest_checkpoint
        if path:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
            except (AssertionError, ValueError) as e:
                # What the half-done restore would log as it is garbage collected (a line for each
                # value it did not use) says nothing the error does not.
                logging.getLogger("tensorflow").setLevel(logging.ERROR)
                reason = (str(e).strip() or type(e).__name__).splitlines()[0]
                raise ModelDirError.of(self.config.model_dir, f"checkpoints of another model ({reason})") from e
            _LOG.info("resumed from %s at step %d", path, int(self.step.numpy()))
        return path

    def evaluate(self, eval_dataset: tf.distribute.DistributedDataset) -> tuple[float, float | None, int]:
        """(mean loss, accuracy, records) over a fresh pass of every record of the evaluation split
        (`eval_steps` padded batches)."""
        loss_sum, correct, records = self._eval_steps(iter(eval_dataset), tf.constant(self.config.eval_steps))
        records = int(records)
        accuracy = int(correct) / records if self.config.classification else None
        return float(loss_sum) / records, accuracy, records

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
        progress = ProgressLines(c, step)
        while step < c.total_steps:
            epoch = step // c.steps_per_epoch
            epoch_end = min((epoch + 1) * c.steps_per_epoch, c.total_steps)
            loss_sum, correct, done, epoch_started = 0.0, 0, 0, time.monotonic()
            while step < epoch_end:
                n = progress.steps(min(c.steps_per_loop, epoch_end - step))
                call_started = time.monotonic()
                loop_loss, loop_correct = self._train_steps(iterator, tf.constant(n))
                loop_loss = float(loop_loss)
                loss_sum, correct, done, step = loss_sum + loop_loss, correct + int(loop_correct), done + n, step + n
                progress.trained(n, loop_loss, time.monotonic() - call_started, step, epoch)
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
            metrics["val_loss"], val_accuracy, metrics["val_records"] = self.evaluate(eval_dataset)
            if val_accuracy is not None:
                metrics["val_accuracy"] = val_accuracy
            self._summaries(writers, metrics)
            self.manager.save(checkpoint_number=step)
            last_saved = step
            result.history.append(metrics)
            if on_epoch:
                on_epoch(metrics)
        if not result.history:  # nothing trained in this run: still report where the model stands
            result.val_loss, result.val_accuracy, result.val_records = self.evaluate(eval_dataset)
        else:
            last = result.history[-1]
            result.train_loss, result.train_accuracy = last["loss"], last.get("accuracy")
            result.val_loss, result.val_accuracy = last["val_loss"], last.get("val_accuracy")
            result.val_records = last["val_records"]
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

    def export(self, labels: tuple[str, ...] = ()) -> str:
        """The model as a SavedModel (serving signature `serve`) in MODEL_DIR/export, with the
        class names in labels.txt (one a line, the name of each logit in order)."""
        path = tf.io.gfile.join(self.config.model_dir, "export")
        if tf.io.gfile.exists(path):
            tf.io.gfile.rmtree(path)  # a rerun replaces the previous export
        self.model.export(path, format="tf_saved_model", verbose=False)
        if labels:
            with tf.io.gfile.GFile(tf.io.gfile.join(path, "labels.txt"), "w") as f:
                f.write("\n".join(labels) + "\n")
        _LOG.info("exported the model to %s", path)
        return path

    def write_summary(self, summary: dict) -> str:
        """The run's summary as MODEL_DIR/training_summary.json; returns its path."""
        path = tf.io.gfile.join(self.config.model_dir, "training_summary.json")
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return path
