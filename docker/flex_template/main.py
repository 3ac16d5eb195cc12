"""Flex Template entry point (FLEX_TEMPLATE_PYTHON_PY_FILE in docker/launcher.Dockerfile).

The launcher calls it with the template's parameters as `--name=value` plus Dataflow's own
pipeline options; PIPELINE_COMMAND (the image's COMMAND build arg) says whether it converts
(`python -m pipeline`) or refreshes (`python -m pipeline refresh`). See
pipeline.dataflow.flex_template.flex_main.
"""

import os
import sys

from pipeline.dataflow.flex_template import flex_main

if __name__ == "__main__":
    sys.exit(
        flex_main(
            os.environ.get("PIPELINE_COMMAND", "convert"),
            sys.argv[1:],
            base_dir=os.path.dirname(os.path.abspath(__file__)),
        )
    )
