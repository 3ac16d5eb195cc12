"""The trainer's flags, without TensorFlow: `python -m trainer --help` and a mistake in the flags
are answered before TensorFlow's seconds of start-up (trainer.__main__), so this module imports
only the standard library. The choices and defaults the flags offer are the ones trainer.model,
trainer.loop and trainer.input_fn take (tests/trainer/test_flags.py holds them equal).
"""

from __future__ import annotations

import argparse
import os
import sys

from core.shown import show

DESCRIPTION = "Train on a dataset the pipeline converted: its manifest.json says what the shards hold."
INSTALLED_COMMAND = "tfrecord-train"  # setup.py's console script
# our small CNN, or a keras.applications class built with weights=None (trainer.model.APPLICATIONS)
ARCHITECTURES = (
    "small_cnn",
    "resnet50",
    "resnet50v2",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "efficientnetv2_b0",
    "densenet121",
)
OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("constant", "cosine")
TRAIN_CROPS = ("random", "center", "none")
EVAL_CROPS = ("center", "none")
CENTER_CROP_FRACTION = 0.875  # of the short side: 224 of 256, the reference evaluation crop
DEFAULT_SHUFFLE_BUFFER = 10_000  # records, as in the reference ImageNet reader


def _command() -> str:
    """The command as the user typed it, for the usage line."""
    return INSTALLED_COMMAND if os.path.basename(sys.argv[0]) == INSTALLED_COMMAND else "python -m trainer"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but for the line that says what is wrong, which quotes the command line:
    it is printed through core.shown.show."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        show(f"{self.prog}: error: {message}", file=sys.stderr)
        self.exit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=_command(), description=DESCRIPTION)
    p.add_argument(
        "--data",
        required=True,
        help="dataset folder or gs:// prefix (holds manifest.json), or a refresh ROOT (follows ROOT/LATEST)",
    )
    p.add_argument("--model_dir", required=True, help="checkpoints, TensorBoard logs and the export (local or gs://)")
    p.add_argument("--tpu", help="TPU name or address ('local' on a TPU VM); default $TPU_NAME; else GPUs or CPU")
    length = p.add_mutually_exclusive_group()
    length.add_argument(
        "--epochs", type=int, help="epochs to train (default 10); an epoch is train records // batch size steps"
    )
    length.add_argument("--steps", type=int, help="total training steps (instead of --epochs)")
    p.add_argument(
        "--batch_size", type=int, default=64, help="global batch size, divided among the replicas (default 64)"
    )
    p.add_argument("--image_size", type=int, default=224, help="images are resized to SIZE x SIZE (default 224)")
    p.add_argument(
        "--architecture",
        default="small_cnn",
        choices=ARCHITECTURES,
        help="image model: small_cnn (default) or a keras.applications model built with weights=None",
    )
    p.add_argument("--label", help="tabular datasets: the target column (int64: classification, float32: regression)")
    p.add_argument("--num_classes", type=int, help="tabular classification: number of classes (labels 0..K-1)")
    p.add_argument(
        "--task",
        choices=("classification", "regression"),
        help="tabular: default classification for an int64 label, regression for a float32 one",
    )
    p.add_argument("--features", help="tabular datasets: comma-separated input columns (default: all but the label)")
    p.add_argument(
        "--string_buckets", type=int, default=64, help="tabular: hash buckets per string column (default 64)"
    )
    p.add_argument("--mixed_precision", action="store_true", help="bfloat16 on TPU, float16 (loss-scaled) on GPU")
    p.add_argument("--optimizer", default="adam", choices=OPTIMIZERS, help="adam (default) or sgd (momentum 0.9)")
    p.add_argument("--learning_rate", type=float, default=1e-3, help="(initial) learning rate (default 0.001)")
    p.add_argument(
        "--schedule",
        default="constant",
        choices=SCHEDULES,
        help="learning rate: constant (default) or cosine decay to 0 over the run's steps",
    )
    p.add_argument(
        "--steps_per_loop",
        type=int,
        default=50,
        help="most training steps per compiled loop call (default 50; fewer when a progress line is due sooner)",
    )
    p.add_argument(
        "--log_every_seconds",
        type=float,
        default=30.0,
        help="seconds between two progress lines, the first once the first step is done (default 30)",
    )
    p.add_argument(
        "--checkpoint_steps", type=int, default=0, help="also checkpoint every N steps (default: each epoch)"
    )
    p.add_argument("--shuffle_buffer", type=int, default=DEFAULT_SHUFFLE_BUFFER, help="records in the shuffle buffer")
    p.add_argument(
        "--train_crop",
        default="random",
        choices=TRAIN_CROPS,
        help="training images: random (Inception-style sampled box, default), center or none (whole image)",
    )
    p.add_argument(
        "--eval_crop",
        default="center",
        choices=EVAL_CROPS,
        help=f"evaluation images: center ({CENTER_CROP_FRACTION:g} of the short side, default) or none",
    )
    p.add_argument("--no_flip", dest="flip", action="store_false", help="no random left-right flip in training")
    p.add_argument("--train_split", default="train", help="the split to train on (default train)")
    p.add_argument(
        "--eval_split", help="the split to evaluate on (default: validation, else test, whichever the dataset has)"
    )
    p.add_argument(
        "--seed", type=int, help="seed for weights and shuffling (runs stay non-deterministic in read order)"
    )
    p.add_argument("--no_export", dest="export", action="store_false", help="skip the final SavedModel export")
    p.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    return p
