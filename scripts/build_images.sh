#!/usr/bin/env bash
# Builds and pushes the images (worker, Flex Template launchers for convert and refresh, training
# cpu/gpu/tpu) to images.repository of configs/cloud/dataflow.yaml, then writes the two Flex Template
# specs to templates.location (tfrecord-convert.json, tfrecord-refresh.json).
#
#   export PROJECT=my-project BUCKET=my-bucket REGION=us-central1
#   gcloud artifacts repositories create tfrecord --repository-format=docker --location="$REGION"   # once
#   scripts/build_images.sh                     # everything
#   scripts/build_images.sh --only launchers    # worker | launchers | training
#   scripts/build_images.sh --dry-run           # print the commands
#
# Needs docker (with BuildKit) and gcloud (authenticated; `gcloud auth configure-docker` is run for
# the registry). Tag: images.tag, default the package version.
set -euo pipefail
source "$(dirname "$0")/usage.sh"
if help_asked "$@"; then print_usage; exit 0; fi
source "$(dirname "$0")/cloud_common.sh"

only=all
push=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --only) only="$2"; shift 2 ;;
    --no-push) push=0; shift ;;
    --dataflow-config) settings_args+=(--config "$(realpath "$2")"); shift 2 ;;
    --set) settings_args+=(--set "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
case "$only" in all|worker|launchers|training) ;; *) echo "--only: worker, launchers or training" >&2; exit 2 ;; esac

cd "$repo"   # the docker build context
read_settings repository=images.repository tag=images.tag templates=templates.location project=job.project
if [ -z "$tag" ]; then tag="$("$python" -c 'import pipeline; print(pipeline.__version__)')"; fi
templates="${templates%/}"
registry="${repository%%/*}"

# The template metadata must list exactly the flags the pipeline accepts: refuse stale files.
for command in convert refresh; do
  if ! diff -q <("$python" -m pipeline.dataflow metadata "$command") "docker/flex_template/${command}_metadata.json" >/dev/null; then
    echo "docker/flex_template/${command}_metadata.json is stale; regenerate it:" >&2
    echo "  $python -m pipeline.dataflow metadata $command > docker/flex_template/${command}_metadata.json" >&2
    exit 1
  fi
done

export DOCKER_BUILDKIT=1
images=()
build() {  # build DOCKERFILE IMAGE [docker build args...]
  local dockerfile="$1" image="$2"; shift 2
  run docker build -f "$dockerfile" -t "$image" "$@" .
  images+=("$image")
}

if [ "$only" = all ] || [ "$only" = worker ]; then
  build docker/worker.Dockerfile "$repository/tfrecord-worker:$tag"
fi
if [ "$only" = all ] || [ "$only" = launchers ]; then
  for command in convert refresh; do
    build docker/launcher.Dockerfile "$repository/tfrecord-$command-launcher:$tag" --build-arg "COMMAND=$command"
  done
fi
if [ "$only" = all ] || [ "$only" = training ]; then
  for variant in cpu gpu tpu; do
    build docker/training.Dockerfile "$repository/tfrecord-trainer:$tag-$variant" --build-arg "VARIANT=$variant"
  done
fi

if [ "$push" = 1 ]; then
  run gcloud auth configure-docker "$registry" --quiet
  for image in "${images[@]}"; do run docker push "$image"; done
  if [ "$only" = all ] || [ "$only" = launchers ]; then
    for command in convert refresh; do
      run gcloud dataflow flex-template build "$templates/tfrecord-$command.json" \
        --image "$repository/tfrecord-$command-launcher:$tag" \
        --sdk-language PYTHON \
        --metadata-file "docker/flex_template/${command}_metadata.json" \
        --project "$project"
    done
  fi
fi
echo "images: ${images[*]}" >&2
[ "$push" = 1 ] && echo "templates: $templates/tfrecord-convert.json $templates/tfrecord-refresh.json" >&2
exit 0
