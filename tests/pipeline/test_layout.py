"""The names in a dataset folder: one template formats and parses shard names, and it agrees with
the names Beam writes from its `shard_name_template` syntax."""

import apache_beam as beam
import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.testing.test_pipeline import TestPipeline

from pipeline.contract.layout import (
    ERROR_FILES,
    GZIP,
    INDEX_SUFFIX,
    MANIFEST_NAME,
    REJECTED_MANIFEST_NAME,
    TFDS_METADATA_FILES,
    UNCOMPRESSED,
    ShardedFileTemplate,
    ShardName,
    is_dataset_file,
    join,
    record_files,
)

RECORD_FILES = record_files(GZIP)


def test_a_name_parses_back_to_its_parts():
    name = RECORD_FILES.name("validation", 3, 12)
    assert name == "validation-00003-of-00012.tfrecord.gz"
    assert RECORD_FILES.parse(name) == ShardName("validation", 3, 12)
    assert RECORD_FILES.is_shard_of(name, "validation") and not RECORD_FILES.is_shard_of(name, "valid")


@pytest.mark.parametrize(
    "name",
    [
        "train-0003-of-00012.tfrecord.gz",
        "train-00003-of-00012.tfrecord",
        "Train-00003-of-00012.tfrecord.gz",
        "train-00003-of-00012.jsonl",
        "manifest.json",
    ],
)
def test_other_names_do_not_parse(name):
    assert RECORD_FILES.parse(name) is None


def test_uncompressed_shards_end_in_tfrecord_and_are_told_apart_from_gzip_ones():
    plain = record_files(UNCOMPRESSED)
    assert plain.name("train", 0, 2) == "train-00000-of-00002.tfrecord"
    assert plain.parse(RECORD_FILES.name("train", 0, 2)) is None
    assert RECORD_FILES.parse(plain.name("train", 0, 2)) is None
    with pytest.raises(ValueError, match="unknown compression 'ZLIB'"):
        record_files("ZLIB")


def test_the_dataset_files_are_recognised_and_nothing_else():
    written = [
        RECORD_FILES.name("train", 0, 2),
        record_files(UNCOMPRESSED).name("train", 0, 2),
        record_files(UNCOMPRESSED).name("train", 0, 2) + INDEX_SUFFIX,
        ERROR_FILES.name("errors", 0, 1),
        ERROR_FILES.name("copies", 0, 1),
        MANIFEST_NAME,
        MANIFEST_NAME + ".tmp",
        *TFDS_METADATA_FILES,
    ]
    assert all(is_dataset_file(name) for name in written)
    others = [
        REJECTED_MANIFEST_NAME,
        "notes.txt",
        ERROR_FILES.name("train", 0, 1),
        "LATEST",
        "train.tfrecord.gz",
        "notes.idx",
    ]
    assert not any(is_dataset_file(name) for name in others)


def test_join_works_for_local_folders_and_gcs_prefixes():
    assert join("/data/set/", "x") == "/data/set/x"
    assert join("gs://bucket/set", "x") == "gs://bucket/set/x"


def test_beam_writes_the_names_the_template_formats(tmp_path):
    with TestPipeline() as p:
        _ = (
            p
            | beam.Create([b"a", b"b", b"c"])
            | beam.io.WriteToTFRecord(
                join(str(tmp_path), "train"),
                file_name_suffix=RECORD_FILES.suffix,
                num_shards=3,
                shard_name_template=ShardedFileTemplate.BEAM_SHARD_TEMPLATE,
                compression_type=CompressionTypes.GZIP,
            )
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == [RECORD_FILES.name("train", i, 3) for i in range(3)]
