# syntax=docker/dockerfile:1
# Dataflow worker image (--sdk_container_image): Apache Beam's Python SDK image, with the Beam and
# Python versions setup.py pins, plus this project installed, so workers need no --setup_file.
# Worker dependencies only: no TensorFlow (the build fails if something pulls it in).
# Build from the repository root (scripts/build_images.sh does):
#   docker build -f docker/worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/REPO/tfrecord-worker:TAG .
FROM apache/beam_python3.11_sdk:2.77.0

WORKDIR /opt/tfrecord-pipeline
COPY setup.py ./
COPY core/ core/
COPY pipeline/ pipeline/
COPY transforms/ transforms/
# The base image already holds apache-beam[gcp]==2.77.0 (setup.py's pin): pip keeps it and adds the
# rest of install_requires.
RUN pip install --no-cache-dir . \
 && python -c "import apache_beam, core, pipeline, transforms; assert apache_beam.__version__ == '2.77.0', apache_beam.__version__" \
 && if python -c "import tensorflow" 2>/dev/null; then echo "TensorFlow must not be installed on workers" >&2; exit 1; fi
WORKDIR /

# Beam's SDK harness boot program, which Dataflow starts (as in the base image).
ENTRYPOINT ["/opt/apache/beam/boot"]
