"""`python -m pipeline ...`, and the installed `tfrecord-pipeline` (setup.py's console scripts)."""

import sys

from pipeline import beam_patches


def main() -> None:
    beam_patches.apply(sys.argv[1:])  # first: it decides what Beam may import
    from pipeline.cli import exit_with_main  # imports Beam

    exit_with_main()


if __name__ == "__main__":
    main()
