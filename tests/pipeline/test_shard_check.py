"""pipeline.shard_check against shards TensorFlow's own writer made: each shard's records counted,
a cut or missing shard a verdict, the record index written from the same pass; in processes of
their own the same verdicts as on one thread, without importing Beam, and an I/O error fails the
read-back instead of becoming a verdict."""

import os

import pytest
import tensorflow as tf

from core.local_files import NotARegularFile
from core.tfrecord_framing import FRAMING_BYTES
from pipeline import shard_check
from pipeline.shard_check import ShardCount, count_shard, count_shards, index_text


def write_shard(path, payloads, compression):
    options = tf.io.TFRecordOptions(compression_type="GZIP" if compression == "GZIP" else "")
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for payload in payloads:
            writer.write(payload)
    return str(path)


@pytest.fixture
def in_processes(monkeypatch):
    """Shards of any size are read in processes (the tests' shards are far below the threshold)."""
    monkeypatch.setattr(shard_check, "IN_PROCESSES_FROM_BYTES", 0)


@pytest.fixture
def shards(tmp_path):
    """Five GZIP shards of 1 to 5 records of different sizes, one cut short, and one missing."""
    paths = [
        write_shard(tmp_path / f"train-{i:05d}-of-00005.gz", [os.urandom(1000 * i)] * i, "GZIP") for i in range(1, 6)
    ]
    cut = tmp_path / "train-00002-of-00005.gz"
    cut.write_bytes(cut.read_bytes()[:-30])
    return [*paths, str(tmp_path / "train-00009-of-00010.gz")]


def test_each_shard_is_counted_or_says_why_not(shards):
    counted = [count_shard(path, "GZIP", index=False) for path in shards]
    assert [c.records for c in counted[2:]] == [3, 4, 5, 0] and counted[0] == ShardCount(counted[0].name, 1)
    assert [c.error == "" for c in counted] == [True, False, True, True, True, False]
    cut = counted[1]
    assert cut.name == "train-00002-of-00005.gz" and cut.error.startswith(f"record {cut.records}: ")
    assert cut.records < 2 and "ends early" in cut.error
    assert counted[5] == ShardCount("train-00009-of-00010.gz", 0, "missing")


def test_the_index_is_written_from_the_same_pass(tmp_path):
    payloads = [b"", b"ab", os.urandom(5000)]
    path = write_shard(tmp_path / "shard", payloads, "NONE")
    assert count_shard(path, "NONE", index=True) == ShardCount("shard", 3)
    sizes = [len(p) + FRAMING_BYTES for p in payloads]
    offsets = [sum(sizes[:i]) for i in range(len(payloads))]
    assert (tmp_path / "index" / "shard.idx").read_text() == index_text(list(zip(offsets, sizes, strict=True)))
    assert index_text([(0, 16), (16, 18)]) == "0 16\n16 18\n"


@pytest.mark.parametrize("processes", [1, 2, 4, 10])
def test_processes_give_the_verdicts_one_thread_gives(shards, processes, in_processes):
    in_processes = count_shards(shards, "GZIP", False, processes)
    assert sorted(in_processes, key=lambda c: c.name) == sorted(
        (count_shard(path, "GZIP", False) for path in shards), key=lambda c: c.name
    )


def test_processes_write_the_same_index(tmp_path, in_processes):
    paths = [write_shard(tmp_path / f"s{i}", [os.urandom(300 * i)] * (i + 1), "NONE") for i in range(3)]
    [count_shard(path, "NONE", index=True) for path in paths]
    on_one_thread = [(tmp_path / "index" / f"s{i}.idx").read_text() for i in range(3)]
    for i in range(3):
        (tmp_path / "index" / f"s{i}.idx").unlink()
    assert sorted(c.records for c in count_shards(paths, "NONE", True, 2)) == [1, 2, 3]
    assert [(tmp_path / "index" / f"s{i}.idx").read_text() for i in range(3)] == on_one_thread


def test_the_processes_do_not_import_beam(shards, tmp_path, monkeypatch, in_processes):
    """A Beam that cannot be imported, ahead of the real one on the processes' path: they still read."""
    fake = tmp_path / "no_beam" / "apache_beam"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('a shard-check process imported Beam')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    here = [count_shard(path, "GZIP", False) for path in shards]
    assert sorted(count_shards(shards, "GZIP", False, 2), key=lambda c: c.name) == sorted(here, key=lambda c: c.name)


def test_an_io_error_in_a_process_fails_the_read_back(shards, tmp_path, in_processes):
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(OSError, match="in a process of its own failed: core.local_files.NotARegularFile: .*a folder"):
        count_shards([*shards, str(tmp_path / "a-directory")], "GZIP", False, 2)


def test_shards_too_small_to_gain_are_read_here(shards, tmp_path):
    """No process is started: the I/O error is raised here, as it is, not by a process."""
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(NotARegularFile, match="a folder"):
        count_shards([*shards, str(tmp_path / "a-directory")], "GZIP", False, 2)
    assert count_shards(shards, "GZIP", False, 2) == [count_shard(path, "GZIP", False) for path in shards]
