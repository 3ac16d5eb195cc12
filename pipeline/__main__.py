"""`python -m pipeline ...`, and the installed `tfrecord-pipeline` (setup.py's console scripts)."""

import sys

from core.shown import show
from pipeline import beam_patches, missing_packages
from pipeline.flags import DEBUG_FLAG, command_name

EXIT_REFUSED = 2  # pipeline.job's: refused before any work (pipeline.job imports Beam)


def main() -> None:
    try:
        beam_patches.apply(sys.argv[1:])  # first: it decides what Beam may import
        from pipeline.cli import exit_with_main  # imports Beam
    except ModuleNotFoundError as e:  # outside the project's environment: one line saying which, and how to get it
        package = missing_packages.missing_package(e)
        if package is None or DEBUG_FLAG in sys.argv:
            raise
        show(missing_packages.refusal(command_name(), package), file=sys.stderr)
        sys.exit(EXIT_REFUSED)
    exit_with_main()


if __name__ == "__main__":
    main()
