"""`python -m pipeline.dataflow ...` (the scripts in scripts/ call it): pipeline.commands.dataflow."""

import sys

from pipeline.commands.dataflow import main

sys.exit(main(sys.argv[1:]))
