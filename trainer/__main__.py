"""`python -m trainer --data DEST --model_dir DIR [...]`, and the `tfrecord-train` command (setup.py).

The flags are checked first, without TensorFlow (trainer.flags): `--help` and a mistake in them
are answered at once. TensorFlow is imported next, through core.contract.tf_import: quietly, and
without it one line naming the extra to install (exit 2) instead of a traceback from
trainer.train's imports.
"""

import sys

from core.contract.tf_import import TensorFlowMissingError, import_tensorflow
from core.shown import show
from trainer.flags import parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser().parse_args(argv)  # exits: 0 after --help, 2 on a mistake in the flags
    try:
        import_tensorflow("training")
    except TensorFlowMissingError as e:
        show(f"error: {e}", file=sys.stderr)
        return 2
    from trainer.train import main as train_main

    return train_main(argv)


if __name__ == "__main__":
    sys.exit(main())
