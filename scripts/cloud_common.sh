# Sourced by the Google Cloud scripts (submit_dataflow, build_images, launch_flex_template,
# schedule_refresh), after they answer --help: the Python to use, settings from
# configs/cloud/dataflow.yaml, --dry-run.
#
#   source "$(dirname "$0")/cloud_common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi  # run alone; its scripts asked first
repo="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"; else python=python3; fi
fi
dry_run=0
settings_args=()   # --config FILE / --set SECTION.KEY=VALUE for python -m pipeline.dataflow

# read_settings VAR=SECTION.KEY ...: values of configs/cloud/dataflow.yaml (placeholders expanded) into
# shell variables, in one call.
read_settings() {
  local pair text i names=() keys=() values=()
  for pair in "$@"; do names+=("${pair%%=*}"); keys+=("${pair#*=}"); done
  text="$("$python" -m pipeline.dataflow get "${keys[@]}" "${settings_args[@]}")" || exit 2
  mapfile -t values <<< "$text"
  for i in "${!names[@]}"; do printf -v "${names[$i]}" '%s' "${values[$i]:-}"; done
}

# run CMD...: runs it, or prints it (shell-quoted) with --dry-run.
run() {
  if [ "$dry_run" = 1 ]; then
    printf '+'; printf ' %q' "$@"; printf '\n'
  else
    "$@"
  fi
}
