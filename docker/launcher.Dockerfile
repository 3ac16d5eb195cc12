# syntax=docker/dockerfile:1
# Dataflow Flex Template launcher image. The launcher runs FLEX_TEMPLATE_PYTHON_PY_FILE with the
# template's parameters; it lists the input, sizes the shards, stages the job and exits (it does not
# wait for the job: the job writes its own manifest and, for a refresh, moves ROOT/LATEST).
# COMMAND picks what the template runs: `convert` (python -m pipeline) or `refresh`
# (python -m pipeline refresh); each has its metadata file in docker/flex_template/.
# Build from the repository root (scripts/build_images.sh does):
#   docker build -f docker/launcher.Dockerfile --build-arg COMMAND=refresh -t .../tfrecord-refresh-launcher:TAG .
# LAUNCHER_BASE_TAG: pin a dated release tag or a digest of the base image in production.
ARG LAUNCHER_BASE_TAG=latest
FROM gcr.io/dataflow-templates-base/python311-template-launcher-base:${LAUNCHER_BASE_TAG}

ARG COMMAND=convert
ENV PIPELINE_COMMAND=${COMMAND}

WORKDIR /template
COPY setup.py ./
COPY core/ core/
COPY pipeline/ pipeline/
COPY transforms/ transforms/
COPY configs/ configs/
COPY docker/flex_template/main.py ./main.py

ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/main.py
# Workers install the package built from this setup.py (unless the job runs the worker image).
ENV FLEX_TEMPLATE_PYTHON_SETUP_FILE=/template/setup.py

RUN pip install --no-cache-dir "apache-beam[gcp]==2.77.0" . \
 && python -c "import apache_beam, pipeline.commands.refresh; assert apache_beam.__version__ == '2.77.0', apache_beam.__version__" \
 && case "${PIPELINE_COMMAND}" in convert|refresh) ;; *) echo "COMMAND must be convert or refresh" >&2; exit 1;; esac

# The Flex Template launcher program, as in the base image.
ENTRYPOINT ["/opt/google/dataflow/python_template_launcher"]
