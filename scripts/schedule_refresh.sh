#!/usr/bin/env bash
# Creates (or updates) the Cloud Scheduler job that launches the refresh Flex Template on the cron
# schedule of configs/cloud/dataflow.yaml (refresh.schedule, time_zone, parameters). Each launch is a
# `python -m pipeline refresh`: unchanged input is skipped, a new version is published to
# ROOT/LATEST only if its run passes its checks.
#
#   export PROJECT=my-project BUCKET=my-bucket
#   scripts/schedule_refresh.sh               # create or update
#   scripts/schedule_refresh.sh --pause       # stop launching (resume with --resume)
#   scripts/schedule_refresh.sh --run-now     # launch once now
#   scripts/schedule_refresh.sh --delete
#   scripts/schedule_refresh.sh --dry-run     # print the commands and the request body
#
# The scheduler's service account (refresh.scheduler_service_account) needs roles/dataflow.developer
# on the project and roles/iam.serviceAccountUser on the job's service account (job.service_account_email);
# see the README.
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
source "$(dirname "$0")/cloud_common.sh"

action=apply
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --pause) action=pause; shift ;;
    --resume) action=resume; shift ;;
    --run-now) action=run; shift ;;
    --delete) action=delete; shift ;;
    --dataflow-config) settings_args+=(--config "$(realpath "$2")"); shift 2 ;;
    --set) settings_args+=(--set "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

read_settings name=refresh.scheduler_job location=refresh.scheduler_location project=job.project region=job.region \
  templates=templates.location job_name=refresh.job_name schedule=refresh.schedule time_zone=refresh.time_zone \
  scheduler_account=refresh.scheduler_service_account

case "$action" in
  pause|resume|run|delete)
    extra=(); [ "$action" = delete ] && extra=(--quiet)
    run gcloud scheduler jobs "$action" "$name" --location "$location" --project "$project" "${extra[@]}"
    exit 0 ;;
esac

body_file="$(mktemp "${TMPDIR:-/tmp}/refresh-launch.XXXXXX.json")"
trap 'rm -f "$body_file"' EXIT
"$python" -m pipeline.dataflow launch-body "${settings_args[@]}" \
  --spec "${templates%/}/tfrecord-refresh.json" --job-name "$job_name" > "$body_file"
if [ "$dry_run" = 1 ]; then echo "request body ($body_file):"; cat "$body_file"; fi

uri="https://dataflow.googleapis.com/v1b3/projects/$project/locations/$region/flexTemplates:launch"
common=(--location "$location" --project "$project"
        --schedule "$schedule" --time-zone "$time_zone"
        --uri "$uri" --http-method POST --message-body-from-file "$body_file"
        --oauth-service-account-email "$scheduler_account"
        --oauth-token-scope https://www.googleapis.com/auth/cloud-platform)
if [ "$dry_run" = 0 ] && gcloud scheduler jobs describe "$name" --location "$location" --project "$project" >/dev/null 2>&1; then
  run gcloud scheduler jobs update http "$name" "${common[@]}" --update-headers Content-Type=application/json
else
  run gcloud scheduler jobs create http "$name" "${common[@]}" --headers Content-Type=application/json
fi
