"""Workers must not pay for TensorFlow (seconds and hundreds of MB per process): nothing a worker imports
may import it."""

import subprocess
import sys

WORKER_MODULES = [
    "pipeline.cli",
    "pipeline.commands.convert",
    "pipeline.commands.refresh",
    "pipeline.build",
    "pipeline.publish",
    "pipeline.version_store",
    "transforms.images",
    "transforms.tabular",
    "transforms.sources",
    "transforms.write",
    "transforms.image_check",
]


def test_worker_modules_do_not_import_tensorflow():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in WORKER_MODULES)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
