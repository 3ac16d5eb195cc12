#!/usr/bin/env bash
# A venv of its own for TensorFlow Data Validation, which reads the statistics the job writes
# (tests/test_statistics.py, tests/pipeline/test_drift.py): TFDV 1.16.1, the newest for Python 3.11 on PyPI, pins
# TensorFlow 2.16, pyarrow 10 and pandas 1, which cannot live beside the project's own pins, and
# pip backtracks for many minutes unless TFDV and tfx-bsl come without their dependencies.
#
#   scripts/tfdv_venv.sh DIR    prints DIR/bin/python once it imports TFDV
#
# One build at a time (DIR.lock): .ci/run starts it in the background while the project installs,
# and the tests that need it wait for it here.
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
venv="${1:?usage: tfdv_venv.sh DIR}"
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c "import tensorflow_data_validation" 2>/dev/null; then
  python3.11 -m venv "$venv"
  "$venv/bin/pip" install -q "tensorflow==2.16.2" "tensorflow-metadata==1.16.1" "pyarrow==10.0.1" "pandas<2" \
    "numpy<2" "protobuf>=4.25.2,<5" "apache-beam==2.61.0" pyfarmhash joblib six absl-py
  "$venv/bin/pip" install -q --no-deps "tfx-bsl==1.16.1" "tensorflow-data-validation==1.16.1"
fi
echo "$venv/bin/python"
