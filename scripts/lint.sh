#!/usr/bin/env bash
# Installs everything (with test dependencies), then checks the code with ruff: lint and formatting
# (settings in pyproject.toml). `ruff format .` fixes the formatting.
#
#   scripts/lint.sh
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
cd "$(dirname "$0")/.."
source scripts/setup_env.sh test
ruff check .
ruff format --check .
