"""How a reader of datasets imports TensorFlow: on demand, in one place, for the commands that
need it (`inspect --verify`, `inspect --contact_sheet`, the trainer). Nothing here imports
TensorFlow until `import_tensorflow()` is called, so the contract stays free of it.

- Without TensorFlow: one line naming the extra to install (TensorFlowMissingError; the commands
  print it and exit 2), not a ModuleNotFoundError traceback. TensorFlow is an extra, not a
  dependency: Dataflow workers install the same package (setup.py) and must not pay for it.
- Quiet start-up on a machine without a GPU: TF_CPP_MIN_LOG_LEVEL=2 before the import (TF's INFO
  and WARNING lines), and the lines TensorFlow's C++ libraries write while they load and look for
  devices (absl's "before absl::InitializeLog()" notice, "Could not find cuda drivers", a failed
  cuInit, CPU feature and oneDNN notes), which no log level reaches, are filtered out of stderr;
  everything else written meanwhile is passed on. TensorFlow's and absl's Python loggers are set
  to WARNING. A user who sets TF_CPP_MIN_LOG_LEVEL themselves (0 shows everything) gets
  TensorFlow exactly as it is: nothing filtered, no logger touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile

TF_EXTRA = "tf"
INSTALL_HINT = f"pip install 'tfrecord-pipeline[{TF_EXTRA}]' (in a source checkout: pip install -e '.[{TF_EXTRA}]')"
LOG_LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LOG_LEVEL = "2"  # INFO and WARNING hidden, errors shown

# What TensorFlow's C++ start-up writes to stderr on a CPU machine whatever TF_CPP_MIN_LOG_LEVEL
# says (seen with TF 2.21; older releases' variants of the same notes included).
START_UP_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called"
    r"|cudart_stub\.cc.*Could not find cuda drivers"
    r"|failed call to cuInit"
    r"|cpu_feature_guard\.cc"
    r"|^To enable the following instructions:"
    r"|oneDNN custom operations are on"
    r"|TF-TRT Warning: Could not find TensorRT"
    r"|Unable to register cu(DNN|FFT|BLAS) factory"
)


class TensorFlowMissingError(ImportError):
    """TensorFlow is not installed; the message says which extra brings it."""


def import_tensorflow(purpose: str = "this command"):
    """The `tensorflow` module, imported quietly (see the module's docstring); raises
    TensorFlowMissingError naming `purpose` when TensorFlow is not installed."""
    loaded = sys.modules.get("tensorflow")
    if loaded is not None:
        return loaded
    chosen_by_user = LOG_LEVEL_VARIABLE in os.environ
    if not chosen_by_user:
        os.environ[LOG_LEVEL_VARIABLE] = QUIET_LOG_LEVEL
    try:
        with contextlib.nullcontext() if chosen_by_user else _start_up_noise_filtered():
            import tensorflow as tf

            # Loads the device platforms now, inside the filter: on a machine without a GPU the
            # failed cuInit is reported here instead of at the first operation.
            tf.config.list_physical_devices()
    except ModuleNotFoundError as e:
        if e.name != "tensorflow":
            raise  # TensorFlow is there but broken: its own error says what is missing
        raise TensorFlowMissingError(
            f"{purpose} needs TensorFlow, which is not installed: {INSTALL_HINT}", name="tensorflow"
        ) from None
    if not chosen_by_user:
        for name in ("tensorflow", "absl"):
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger(name).level))
    return tf


@contextlib.contextmanager
def _start_up_noise_filtered():
    """Collects what is written to file descriptor 2 (C++ and Python alike) meanwhile, then
    writes it back without the START_UP_NOISE lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [
                line
                for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not START_UP_NOISE.search(line)
            ]
            if kept:
                os.write(2, "".join(kept).encode("utf-8", "replace"))
