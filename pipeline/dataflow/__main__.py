"""`python -m pipeline.dataflow ...` (the scripts in scripts/ call it): pipeline.commands.dataflow."""

import sys

from pipeline.cli import run
from pipeline.commands.dataflow import main

sys.exit(run(main, sys.argv[1:]))
