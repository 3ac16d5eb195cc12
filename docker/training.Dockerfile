# syntax=docker/dockerfile:1
# Training job image: TensorFlow and the trainer (python -m trainer --data ROOT_OR_DATASET ...).
# The trainer follows ROOT/LATEST (core.contract.folders.dataset_folder). From the job it
# needs only the dataset contract (core/contract/: Python and jsonschema, which checks every
# manifest it reads against its schema), the opener of local files (core/local_files.py) and the
# escaper of what it prints (core/shown.py), so no Beam is installed.
# VARIANT picks the TensorFlow build, nothing else differs:
#   cpu  tensorflow                      (tests, small runs)
#   gpu  tensorflow[and-cuda]            (CUDA/cuDNN from pip wheels; needs the host's NVIDIA driver)
#   tpu  tensorflow-tpu + libtpu         (Cloud TPU VMs)
# Build from the repository root (scripts/build_images.sh does):
#   docker build -f docker/training.Dockerfile --build-arg VARIANT=gpu -t .../tfrecord-trainer:TAG-gpu .
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}

ARG VARIANT=gpu
ARG TENSORFLOW_VERSION=2.21.0
ARG LIBTPU_INDEX=https://storage.googleapis.com/libtpu-tf-releases/index.html
ARG JSONSCHEMA=jsonschema>=4.23,<5

RUN case "${VARIANT}" in \
      cpu) pip install --no-cache-dir "tensorflow==${TENSORFLOW_VERSION}" ;; \
      gpu) pip install --no-cache-dir "tensorflow[and-cuda]==${TENSORFLOW_VERSION}" ;; \
      tpu) pip install --no-cache-dir "tensorflow-tpu==${TENSORFLOW_VERSION}" -f "${LIBTPU_INDEX}" ;; \
      *) echo "VARIANT must be cpu, gpu or tpu, got ${VARIANT}" >&2; exit 1 ;; \
    esac \
    && pip install --no-cache-dir "${JSONSCHEMA}"

WORKDIR /app
COPY core/__init__.py core/
COPY core/contract/ core/contract/
COPY core/local_files.py core/shown.py core/
COPY trainer/ trainer/
ENV PYTHONPATH=/app PYTHONUNBUFFERED=1
RUN python -c "import tensorflow as tf, jsonschema, trainer.train, core.contract.versions; assert tf.__version__ == '${TENSORFLOW_VERSION}', tf.__version__"

ENTRYPOINT ["python", "-m", "trainer"]
