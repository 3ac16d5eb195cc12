"""`python -m pipeline ...`, and the installed `tfrecord-pipeline` (setup.py's console scripts)."""

import sys

from pipeline.unused_modules import leave_out_unless_needed


def main() -> None:
    leave_out_unless_needed(sys.argv[1:])  # before anything imports Beam
    from pipeline.cli import exit_with_main  # imports Beam

    exit_with_main()


if __name__ == "__main__":
    main()
