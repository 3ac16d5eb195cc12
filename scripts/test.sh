#!/usr/bin/env bash
# Installs everything (with test dependencies), then runs the test suite.
#
#   scripts/test.sh [PYTEST ARGUMENTS]    e.g. scripts/test.sh tests/test_inspect.py -x
#
# pytest's own help: .venv/bin/python -m pytest --help
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
cd "$(dirname "$0")/.."
source scripts/setup_env.sh test
python -m pytest "$@"
