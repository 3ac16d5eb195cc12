#!/usr/bin/env bash
# Installs everything (with test dependencies), then checks the code with ruff: lint and formatting
# (settings in pyproject.toml). `ruff format .` fixes the formatting.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh test
ruff check .
ruff format --check .
