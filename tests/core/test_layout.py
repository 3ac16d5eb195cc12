"""The names in a dataset folder: one template formats and parses shard names, and the job's
writer writes those names; a manifest's names stay inside the folder."""

import posixpath

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from hypothesis import given
from hypothesis import strategies as st

from core.contract.layout import (
    GZIP,
    UNCOMPRESSED,
    ShardName,
    is_contained,
    join,
    record_files,
    temporary_name,
    temporary_of,
)
from transforms.outcomes import Record
from transforms.write import WriteSplits

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


def test_join_works_for_local_folders_and_gcs_prefixes():
    assert join("/data/set/", "x") == "/data/set/x"
    assert join("gs://bucket/set", "x") == "gs://bucket/set/x"


def test_the_job_writes_the_names_the_template_formats(tmp_path):
    records = [Record("train", "a", False, bytes([i])) for i in range(7)]
    with TestPipeline() as p:
        _ = p | beam.Create(records) | WriteSplits(str(tmp_path), {"train": 3}, GZIP)
    assert sorted(p.name for p in tmp_path.iterdir()) == [RECORD_FILES.name("train", i, 3) for i in range(3)]


@given(st.text(st.characters(blacklist_characters="/\0"), min_size=1), st.text("abcdef0123456789", min_size=1))
def test_a_temporary_name_is_hidden_and_stands_for_its_file(name, token):
    temporary = temporary_name(name, token)
    assert temporary.startswith(".") and temporary_of(temporary) == name


_PART = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@given(st.lists(_PART, min_size=1, max_size=4))
def test_a_manifest_name_is_contained_exactly_when_it_cannot_leave_the_folder(parts):
    name = "/".join(parts)
    escapes = posixpath.normpath("/root/" + name).startswith("/root/") is False or name.startswith("/")
    odd = any(part in ("", ".", "..") or "\\" in part or "://" in name for part in name.split("/"))
    control = any(ord(c) < 32 or ord(c) == 127 for c in name)
    assert is_contained(name) == (not escapes and not odd and not control)
    if is_contained(name):
        assert posixpath.normpath(posixpath.join("/root", name)).startswith("/root/")


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../x", "gs://other/x", "a\\..\\x", ".", "", "a//b"])
def test_names_that_leave_the_folder_are_not_contained(name):
    assert not is_contained(name)
