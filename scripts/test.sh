#!/usr/bin/env bash
# Installs everything (with test dependencies), then runs the test suite, one pytest process per
# core (pytest-xdist), each test file's tests in one of them (its module fixtures made once).
#
#   scripts/test.sh [PYTEST ARGUMENTS]    e.g. scripts/test.sh tests/test_inspect.py -x
#   scripts/test.sh -n 0 [...]            in this process alone (pdb, -s, a single test)
#
# pytest's own help: .venv/bin/python -m pytest --help
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
cd "$(dirname "$0")/.."
source scripts/setup_env.sh test
python -m pytest --numprocesses auto --dist loadfile "$@"
