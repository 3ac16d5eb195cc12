#!/usr/bin/env bash
# Creates .venv (if missing) and installs the project with the given extras; idempotent.
#
#   source scripts/setup_env.sh [EXTRAS]    e.g. "test" or "test,bench"; "" for none
#
# Sourced, it also puts .venv/bin first on the PATH of the shell that sourced it. Always give
# EXTRAS when sourcing from a script: without it, bash passes the script's own arguments.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
if help_asked "$@"; then print_usage; return 0 2>/dev/null || exit 0; fi  # sourced: return, not end the shell
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x "$repo/.venv/bin/python" ]; then
  echo "Creating virtual environment in $repo/.venv" >&2
  "$python" -m venv "$repo/.venv"
fi
echo "Installing dependencies${extras:+ [$extras]} (first run takes a few minutes)" >&2
"$repo/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$repo/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$repo${extras:+[$extras]}"
export PATH="$repo/.venv/bin:$PATH"
