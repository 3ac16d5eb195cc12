"""The same conversions with gs:// input and output, against a real GCS emulator server on
loopback. TensorFlow cannot read from the emulator, so outputs are downloaded first."""

from __future__ import annotations

import pathlib
import shutil

import pytest
import tensorflow as tf
from apache_beam.io.filesystems import FileSystems

from core.contract.layout import SHARD_PARTS_FOLDER
from pipeline.cli import main
from tests import broken_images
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from transforms.splits import assign_split

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample"
FRACTIONS = (("train", 0.8), ("validation", 0.2))


def download_dataset(emulator, prefix: str, local: pathlib.Path) -> pathlib.Path:
    """The dataset's files (not Beam's temporary folders nor shard parts, which must be gone) into
    `local`, at the same paths below it as below `prefix`."""
    uris = emulator.list_uris(prefix + "/")
    assert not [u for u in uris if "beam-temp" in u or SHARD_PARTS_FOLDER in u], "temporary files left behind"
    for uri in uris:
        path = local / uri[len(prefix) + 1 :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(emulator.read_bytes(uri))
    return local


def small_sample(tmp_path: pathlib.Path, per_class: int = 8) -> pathlib.Path:
    root = tmp_path / "photos"
    for label_dir in sorted((SAMPLE / "images").iterdir()):
        (root / label_dir.name).mkdir(parents=True)
        for path in sorted(label_dir.iterdir())[:per_class]:
            shutil.copy(path, root / label_dir.name / path.name)
    (root / "circle" / "truncated.jpg").write_bytes(broken_images.truncated_jpeg())
    (root / "square" / ".DS_Store").write_bytes(b"\0")
    return root


def test_split_folders_on_gcs(gcs_emulator, gcs_bucket, tmp_path):
    """The folder names below a gs:// prefix decide its layout as they do on local disk (the
    planner asks for them without the objects beside them), and the job reads each image's split
    from its split folder, listing the prefix in name ranges."""
    local = tmp_path / "photos"
    for split_folder, per_class in (("train", 5), ("Valid", 2)):
        for label_dir in sorted((SAMPLE / "images").iterdir()):
            (local / split_folder / label_dir.name).mkdir(parents=True)
            photos = sorted(label_dir.iterdir())
            for path in photos[:per_class] if split_folder == "train" else photos[-per_class:]:
                shutil.copy(path, local / split_folder / label_dir.name / path.name)
    gcs_emulator.upload_dir(local, f"gs://{gcs_bucket}/raw")
    out = f"gs://{gcs_bucket}/tfrecords/photos"
    assert main(["--input", f"gs://{gcs_bucket}/raw", "--output", out]) == 0

    dataset = download_dataset(gcs_emulator, out, tmp_path / "dl")
    manifest = load_manifest(dataset)
    assert manifest.inputs["layout"]["split_folders"] == {"Valid": "validation", "train": "train"}
    assert manifest.label_map == ("circle", "square", "triangle")
    for split, folder, count in (("train", "train", 15), ("validation", "Valid", 6)):
        records = read_split(dataset, split)
        assert len(records) == count
        for record in records:
            key = record["image/filename"].decode().removeprefix(f"gs://{gcs_bucket}/raw/")
            assert key.split("/")[:2] == [folder, record["image/class/text"].decode()]
            assert record["image/encoded"] == (local / key).read_bytes()


def test_a_table_of_image_paths_on_gcs_names_the_kind_that_converts_the_images(gcs_emulator, gcs_bucket, tmp_path):
    """A gs:// pattern is not looked into before the run (pipeline.input_shape): planning, which
    reads its first file anyway, names the column of image paths."""
    gcs_emulator.upload_bytes(f"gs://{gcs_bucket}/t/list.csv", b"id,caption,path\n1,a cat,imgs/1.jpg\n2,a dog,x.png\n")
    out = f"gs://{gcs_bucket}/out"
    assert main(["--kind", "csv", "--input", f"gs://{gcs_bucket}/t/*.csv", "--output", out]) == 0
    manifest = load_manifest(download_dataset(gcs_emulator, out, tmp_path / "dl"))
    [warning] = [w for w in manifest.warnings if "paths of image files" in w]
    assert "column(s) ['path']" in warning and "--kind image_csv" in warning


@pytest.mark.parametrize("processes", [0, 2])
def test_class_folders_on_gcs(gcs_emulator, gcs_bucket, tmp_path, processes):
    """Converted on the threads (as below 3 cores) and in converting processes, which read gs://
    sources through Beam themselves and hand the records back for the bundle to write to gs://."""
    local = small_sample(tmp_path)
    gcs_emulator.upload_dir(local, f"gs://{gcs_bucket}/raw")
    out = f"gs://{gcs_bucket}/tfrecords/photos"
    config = tmp_path / "config.yaml"
    config.write_text(f"image: {{local_processes: {processes}}}\n")
    args = ["--input", f"gs://{gcs_bucket}/raw", "--output", out, "--max_error_fraction", "0.5"]
    assert main([*args, "--config", str(config)]) == 0

    dataset = download_dataset(gcs_emulator, out, tmp_path / "dl")
    manifest = load_manifest(dataset)
    assert (manifest.counts.listed, manifest.counts.written, manifest.counts.skipped, manifest.counts.errors) == (
        26,
        24,
        1,
        1,
    )
    [letter] = read_dead_letters(dataset)
    assert letter["source"] == f"gs://{gcs_bucket}/raw/circle/truncated.jpg"
    assert letter["stage"] == "decode"
    seen = 0
    for split in manifest.splits:
        for record in read_split(dataset, split):
            uri = record["image/filename"].decode()
            key = uri.removeprefix(f"gs://{gcs_bucket}/raw/")
            assert record["image/encoded"] == (local / key).read_bytes()
            assert record["image/class/text"].decode() == key.split("/")[0]
            assert split == assign_split(key, FRACTIONS)  # same split as the same file on local disk
            shape = tf.io.decode_image(record["image/encoded"], expand_animations=False).shape
            assert tuple(shape) == (record["image/height"], record["image/width"], record["image/channels"])
            seen += 1
    assert seen == 24


def test_image_csv_on_gcs(gcs_emulator, gcs_bucket, tmp_path):
    local = small_sample(tmp_path, per_class=4)
    gcs_emulator.upload_dir(local, f"gs://{gcs_bucket}/data/images")
    rows = sorted(p.relative_to(local).as_posix() for p in local.rglob("*.jpg") if "truncated" not in p.name)
    csv_text = "split,image_uri,label\n" + "".join(f"UNASSIGNED,images/{r},{r.split('/')[0]}\n" for r in rows)
    gcs_emulator.upload_bytes(f"gs://{gcs_bucket}/data/labels.csv", csv_text.encode())
    out = f"gs://{gcs_bucket}/out"
    assert main(["--kind", "image_csv", "--input", f"gs://{gcs_bucket}/data/labels.csv", "--output", out]) == 0

    dataset = download_dataset(gcs_emulator, out, tmp_path / "dl")
    manifest = load_manifest(dataset)
    got = {r["image/filename"].decode(): split for split in manifest.splits for r in read_split(dataset, split)}
    assert got == {f"gs://{gcs_bucket}/data/images/{r}": assign_split(f"images/{r}", FRACTIONS) for r in rows}


def test_tabular_csv_on_gcs(gcs_emulator, gcs_bucket, tmp_path):
    gcs_emulator.upload_dir(SAMPLE / "tabular", f"gs://{gcs_bucket}/tables")
    out = f"gs://{gcs_bucket}/out"
    assert main(["--kind", "csv", "--input", f"gs://{gcs_bucket}/tables/*.csv*", "--output", out]) == 0

    dataset = download_dataset(gcs_emulator, out, tmp_path / "dl")
    manifest = load_manifest(dataset)
    ids = sorted(r["id"] for split in manifest.splits for r in read_split(dataset, split))
    expected = sorted(
        int(line.split(",")[0])
        for path in sorted((SAMPLE / "tabular").glob("*.csv"))
        for line in path.read_text().splitlines()[1:]
    )
    assert len(ids) == manifest.counts.written == manifest.counts.listed
    assert set(expected) <= set(ids)  # the plain files' rows; the .gz file's rows make up the rest


def test_uncompressed_with_indexes_and_tfds_metadata_on_gcs(gcs_emulator, gcs_bucket, tmp_path):
    """The read-back writes the indexes and the publication the TFDS files through GCS as well;
    what the manifest names is all there and matches the shards."""
    local = small_sample(tmp_path, per_class=4)
    gcs_emulator.upload_dir(local, f"gs://{gcs_bucket}/raw")
    out = f"gs://{gcs_bucket}/plain"
    argv = ["--input", f"gs://{gcs_bucket}/raw", "--output", out, "--max_error_fraction", "0.5"]
    assert main([*argv, "--compression", "none", "--index", "--num_shards", "2"]) == 0

    dataset = download_dataset(gcs_emulator, out, tmp_path / "dl")
    manifest = load_manifest(dataset)
    assert manifest.compression == "NONE" and {"dataset_info.json", "features.json"} <= set(manifest.metadata_files)
    for name, split in manifest.splits.items():
        assert len(read_split(dataset, name)) == split.records == sum(split.shard_lengths)
        for shard, index in zip(split.shards, split.index_files, strict=True):
            lines = (dataset / index).read_text().splitlines()
            assert len(lines) == len(read_split_shard(dataset / shard))
            assert sum(int(line.split()[1]) for line in lines) == (dataset / shard).stat().st_size
    for name in manifest.metadata_files:
        assert (dataset / name).exists()
    shards = {s for split in manifest.splits.values() for s in split.shards}
    for pattern in ("train-*", "*.tfrecord*", "*-of-*"):  # as readers glob shards on GCS
        [found] = FileSystems.match([f"{out}/{pattern}"])
        matched = {m.path.rsplit("/", 1)[-1] for m in found.metadata_list}
        assert matched & shards and not [m for m in matched if m.endswith(".idx")], pattern


def read_split_shard(path: pathlib.Path) -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
