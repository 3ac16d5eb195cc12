#!/usr/bin/env bash
# Launches a job from a Flex Template built by scripts/build_images.sh, with the job settings of
# configs/cloud/dataflow.yaml; the template's parameters are the pipeline's own flags.
#
#   export PROJECT=my-project BUCKET=my-bucket
#   scripts/launch_flex_template.sh --input gs://my-bucket/raw/photos --output gs://my-bucket/tfrecords/photos
#   scripts/launch_flex_template.sh --refresh --input gs://my-bucket/raw/photos --output gs://my-bucket/datasets/photos --keep 5
#   scripts/launch_flex_template.sh --dry-run ...     # print the gcloud command
#
# Pipeline flags: --input --output --kind --config --splits --num_shards --reader_hosts
# --target_shard_mib --max_error_fraction --overwrite (and --keep with --refresh). The launcher
# does not wait: watch the job with `gcloud dataflow jobs list --region R` (see README).
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
source "$(dirname "$0")/cloud_common.sh"

command=convert
parameters=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --refresh) command=refresh; shift ;;
    --dataflow-config) settings_args+=(--config "$(realpath "$2")"); shift 2 ;;
    --set) settings_args+=(--set "$2"); shift 2 ;;
    --overwrite) parameters+=("overwrite=true"); shift ;;
    --*=*) name="${1%%=*}"; parameters+=("${name#--}=${1#*=}"); shift ;;
    --*) [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }; parameters+=("${1#--}=$2"); shift 2 ;;
    *) echo "unexpected argument $1" >&2; exit 2 ;;
  esac
done

# Only the template's parameters (docker/flex_template/<command>_metadata.json) are accepted.
known="$("$python" -c 'import json, sys; print(" ".join(p["name"] for p in json.load(open(sys.argv[1]))["parameters"]))' \
  "$repo/docker/flex_template/${command}_metadata.json")"
for parameter in "${parameters[@]}"; do
  case " $known " in *" ${parameter%%=*} "*) ;; *) echo "--${parameter%%=*} is not a parameter of the $command template (it takes: $known)" >&2; exit 2 ;; esac
done
read_settings worker_image=job.sdk_container_image templates=templates.location
if [ -n "$worker_image" ]; then parameters+=("sdk_container_image=$worker_image"); fi
if [ ${#parameters[@]} -eq 0 ]; then echo "give at least --input and --output" >&2; exit 2; fi

flags_text="$("$python" -m pipeline.dataflow gcloud-flags "${settings_args[@]}")"
mapfile -t flags < <(printf '%s\n' "$flags_text" | sed '/^$/d')
# '^~^' makes '~' the separator, so values may hold commas (splits=train=0.8,validation=0.2).
joined="$(IFS='~'; echo "${parameters[*]}")"
run gcloud dataflow flex-template run "tfrecord-$command-$(date -u +%Y%m%d-%H%M%S)" \
  --template-file-gcs-location "${templates%/}/tfrecord-$command.json" \
  "${flags[@]}" \
  --parameters "^~^$joined"
