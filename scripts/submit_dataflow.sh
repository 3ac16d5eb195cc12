#!/usr/bin/env bash
# Runs the pipeline on Dataflow (DataflowRunner) with the job settings of configs/cloud/dataflow.yaml
# (project, region, temp/staging locations, machine type, workers, service account, network,
# labels, setup_file or worker image), then waits for the job and prints its summary.
#
#   export PROJECT=my-project BUCKET=my-bucket            # placeholders of configs/cloud/dataflow.yaml
#   scripts/submit_dataflow.sh --input gs://my-bucket/raw/photos --output gs://my-bucket/tfrecords/photos
#   scripts/submit_dataflow.sh refresh --input gs://... --output gs://my-bucket/datasets/photos --keep 5
#
# Options before the pipeline's flags:
#   --dataflow-config FILE     settings file (default configs/cloud/dataflow.yaml)
#   --set SECTION.KEY=VALUE    override a setting, e.g. --set job.max_num_workers=50
#                              or, for the worker image: --set job.sdk_container_image=IMAGE --set job.setup_file=
# Everything else goes to `python -m pipeline` (its flags: python -m pipeline --help; later Beam flags
# override the config's):
#   --dry_run=True             build the job without submitting it (offline check)
#   --template_location gs://  stage a classic template instead of running (all parameters baked in)
# Ctrl-C stops waiting, not the job: cancel it with `gcloud dataflow jobs cancel JOB_ID --region R`.
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
source "$(dirname "$0")/cloud_common.sh"

while [ $# -gt 0 ]; do
  case "$1" in
    --dataflow-config) settings_args+=(--config "$(realpath "$2")"); shift 2 ;;
    --dataflow-config=*) settings_args+=(--config "$(realpath "${1#*=}")"); shift ;;
    --set) settings_args+=(--set "$2"); shift 2 ;;
    --set=*) settings_args+=(--set "${1#*=}"); shift ;;
    *) break ;;
  esac
done
command=()
if [ "${1:-}" = refresh ]; then command=(refresh); shift; fi

flags_text="$("$python" -m pipeline.dataflow beam-flags "${settings_args[@]}")"
mapfile -t flags < <(printf '%s\n' "$flags_text" | sed '/^$/d')
exec "$python" -m pipeline "${command[@]}" "${flags[@]}" "$@"
