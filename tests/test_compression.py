"""`compression: none` and `index: true` (issue 12): uncompressed shards named `.tfrecord` that
every reader of the project follows from the manifest, and record indexes written by the
read-back, in the `offset length` format DALI and the `tfrecord` package share."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import random
import shutil
import struct
import subprocess
import sys

import pytest
import tensorflow as tf

from core.contract.layout import index_file
from core.tfrecord_framing import masked_crc32c
from pipeline.cli import main
from pipeline.commands import inspect
from pipeline.tfrecord_reader import RecordError, read_records
from tests.dataset_reader import load_manifest, load_rejected, read_split
from tests.test_publication import photos, whole_dataset
from trainer import input_fn

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample" / "images"


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> pathlib.Path:
    """The bundled sample, uncompressed with indexes, two shards per split."""
    out = tmp_path_factory.mktemp("plain") / "dataset"
    argv = ["--input", SAMPLE, "--output", out, "--num_shards", "2", "--compression", "none", "--index"]
    assert main([str(a) for a in argv]) == 0
    return out


def index_lines(path: pathlib.Path) -> list[tuple[int, int]]:
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines()]


def test_uncompressed_shards_end_in_tfrecord_and_tensorflow_reads_them_as_the_manifest_says(plain):
    manifest = load_manifest(plain)
    assert manifest.compression == "NONE" and manifest.tf_compression_type == ""
    assert json.loads((plain / "manifest.json").read_text())["format_version"] == 3
    for name, split in manifest.splits.items():
        assert split.shards and all(s.endswith(".tfrecord") for s in split.shards)
        assert split.index_files == tuple(index_file(s) for s in split.shards)
        assert len(read_split(plain, name)) == split.records == sum(split.shard_lengths)
        for shard in split.shards:
            assert (plain / shard).read_bytes()[:2] != b"\x1f\x8b"  # no GZIP magic
    assert not list(plain.glob("*.gz"))


def test_each_index_line_locates_its_record(plain):
    manifest = load_manifest(plain)
    rng = random.Random(7)
    for split in manifest.splits.values():
        for shard, index, length in zip(split.shards, split.index_files, split.shard_lengths, strict=True):
            entries = index_lines(plain / index)
            data = (plain / shard).read_bytes()
            assert len(entries) == length
            # Contiguous, from the start of the file to its end.
            assert entries[0][0] == 0 and sum(n for _, n in entries) == len(data)
            assert all(a + n == b for (a, n), (b, _) in zip(entries, entries[1:], strict=False))
            records = [r.numpy() for r in tf.data.TFRecordDataset(str(plain / shard))]
            for i in rng.sample(range(length), min(10, length)):  # random access, as DALI reads
                offset, size = entries[i]
                frame = data[offset : offset + size]
                (payload_length,) = struct.unpack("<Q", frame[:8])
                payload = frame[12 : 12 + payload_length]
                assert payload_length + 16 == size
                assert struct.unpack("<I", frame[-4:])[0] == masked_crc32c(payload)
                assert payload == records[i]


def test_inspect_verify_reads_uncompressed_shards_and_checks_their_indexes(plain, tmp_path, capsys):
    copy = pathlib.Path(shutil.copytree(plain, tmp_path / "copy"))
    assert inspect.main([str(copy), "--verify"]) == 0
    index = copy / load_manifest(copy).splits["train"].index_files[0]
    lines = index.read_text().splitlines()
    lines[1], lines[2] = lines[2], lines[1]
    index.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert inspect.main([str(copy), "--verify"]) == 1
    assert f"{index.name}: does not match its shard: line 2" in capsys.readouterr().out


def test_the_trainer_reads_uncompressed_shards(plain):
    manifest = load_manifest(plain)
    images, labels = next(
        iter(input_fn.image_dataset(str(plain), manifest, "validation", 8, image_size=32, training=False))
    )
    assert images.shape == (8, 32, 32, 3) and labels.shape == (8,)


def test_the_reader_checks_uncompressed_framing(plain, tmp_path):
    shard = plain / load_manifest(plain).splits["train"].shards[0]
    cut = tmp_path / shard.name
    cut.write_bytes(shard.read_bytes()[:-5])
    with pytest.raises(RecordError, match="truncated"):
        list(read_records(str(cut), "NONE", inside=None))
    with pytest.raises(RecordError):  # an uncompressed shard is not GZIP
        list(read_records(str(shard), "GZIP", inside=None))


def test_an_index_of_gzip_shards_is_refused_in_one_line(tmp_path, caplog):
    assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "out"), "--index"]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line == "flag --index: needs compression: none (an offset into a GZIP stream cannot be read at), got True"
    assert not (tmp_path / "out").exists()


def test_an_overwrite_in_another_compression_leaves_only_the_new_dataset(tmp_path):
    source, out = photos(tmp_path / "src", 4), tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), "--num_shards", "2"]) == 0
    argv = ["--input", str(source), "--output", str(out), "--num_shards", "2", "--overwrite"]
    assert main([*argv, "--compression", "none", "--index"]) == 0
    manifest = whole_dataset(out)
    named = {f for split in manifest.splits.values() for f in (*split.shards, *split.index_files)}
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert files == named | {"manifest.json", *manifest.report_files, *manifest.metadata_files}
    assert not any(name.endswith(".gz") for name in files)


def test_a_rejected_run_leaves_no_shard_and_no_index(tmp_path):
    source, out = photos(tmp_path / "src", 4), tmp_path / "out"
    (source / "circle" / "broken.jpg").write_bytes(b"<html>not an image</html>")
    argv = ["--input", source, "--output", out, "--compression", "none", "--index", "--max_error_fraction", "0"]
    assert main([str(a) for a in argv]) == 1
    assert load_rejected(out).rejected
    assert not [p.name for p in out.rglob("*") if p.suffix in (".tfrecord", ".idx")]
    assert not (out / "index").exists()


def test_tfds_loads_every_record_of_an_uncompressed_dataset(plain):
    tfds = pytest.importorskip("tensorflow_datasets")
    manifest = load_manifest(plain)
    assert set(manifest.metadata_files) >= {"dataset_info.json", "features.json"}
    builder = tfds.builder_from_directory(str(plain))
    for name, split in manifest.splits.items():
        filenames = sorted(r["image"]["filename"].numpy() for r in builder.as_dataset(split=name))
        assert filenames == sorted(r["image/filename"] for r in read_split(plain, name))
        assert builder.info.splits[name].shard_lengths == list(split.shard_lengths)


def test_a_refresh_version_gets_its_tfds_metadata_too(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    source, root = photos(tmp_path / "src", 4), tmp_path / "root"
    argv = ["refresh", "--input", str(source), "--output", str(root), "--compression", "none"]
    assert main(argv) == 0
    version = root / (root / "LATEST").read_text().strip()
    train = tfds.builder_from_directory(str(version)).as_dataset(split="train")
    assert sum(1 for _ in train) == load_manifest(version).splits["train"].records


def test_the_tfrecord_package_splits_records_across_workers_by_our_index(plain):
    """What PyTorch's DataLoader does per worker with the `tfrecord` package and an index
    (`shard=(worker, workers)`): every record once, none twice. Without an index every worker
    would read the whole file. In a subprocess: the package declares its own `tensorflow.Example`
    protos, which clash with TensorFlow's in one process."""
    if importlib.util.find_spec("tfrecord") is None:
        pytest.skip("the tfrecord package is not installed")
    split = load_manifest(plain).splits["train"]
    script = (
        "import json, sys\n"
        "from tfrecord.reader import tfrecord_loader\n"
        "data, index = sys.argv[1:]\n"
        "print(json.dumps([[bytes(e['image/filename']).decode() for e in "
        "tfrecord_loader(data, index, ['image/filename'], (worker, 2))] for worker in range(2)]))\n"
    )
    for shard, index in zip(split.shards, split.index_files, strict=True):
        done = subprocess.run(
            [sys.executable, "-c", script, str(plain / shard), str(plain / index)],
            capture_output=True,
            text=True,
            check=True,
        )
        first, second = json.loads(done.stdout)
        expected = [
            tf.train.Example.FromString(r.numpy()).features.feature["image/filename"].bytes_list.value[0].decode()
            for r in tf.data.TFRecordDataset(str(plain / shard))
        ]
        assert first and second and not set(first) & set(second)
        assert sorted(first + second) == sorted(expected)
