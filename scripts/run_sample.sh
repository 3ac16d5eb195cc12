#!/usr/bin/env bash
# Installs everything, then converts the bundled sample (class folders of shapes) to
# output/sample/ and prints the summary.
#
#   scripts/run_sample.sh [FLAGS]    e.g. scripts/run_sample.sh --kind csv
#
# FLAGS go to `python -m pipeline` (its flags: python -m pipeline --help).
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
cd "$(dirname "$0")/.."
source scripts/setup_env.sh ""   # no extras (without an argument it would take this script's)
python -m pipeline --overwrite "$@"
