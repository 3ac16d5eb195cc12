"""TFDS metadata (pipeline/tfds_metadata.py): uncompressed datasets built here with TensorFlow's own
TFRecord writer and real tf.train.Example records, described by a manifest as the pipeline writes
it, then loaded with `tfds.builder_from_directory(...).as_dataset(...)`: every record, every value.
The files are also compared, byte for byte, with what `tfds.folder_dataset.write_metadata` writes
for the same dataset."""

from __future__ import annotations

import dataclasses
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from core.contract.layout import GZIP, UNCOMPRESSED, record_files
from core.contract.manifest import Counts, FeatureSpec, Manifest, SplitInfo
from pipeline.tfds_metadata import (
    DATASET_INFO_NAME,
    FEATURES_NAME,
    FILEPATH_TEMPLATE,
    TfdsMetadataError,
    tfds_metadata,
)

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample" / "images"
LABELS = ("circle", "square", "triangle")
SHARDS = {"train": (3, 2), "validation": (2,)}  # records per shard, so a slice crosses a shard
# The image records' keys (core.contract.features.DEFAULT_IMAGE_KEYS, fixed here) and dtypes.
IMAGE_KEYS = {
    "encoded": ("image/encoded", "string"),
    "format": ("image/format", "string"),
    "height": ("image/height", "int64"),
    "width": ("image/width", "int64"),
    "channels": ("image/channels", "int64"),
    "label": ("image/class/label", "int64"),
    "text": ("image/class/text", "string"),
    "filename": ("image/filename", "string"),
    "source_id": ("image/source_id", "string"),
}


def _feature(value) -> tf.train.Feature:
    values = value if isinstance(value, list) else [value]
    if isinstance(values[0], bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if isinstance(values[0], float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _write_dataset(folder: pathlib.Path, records: dict[str, list[dict]], manifest: Manifest) -> Manifest:
    """Writes each split's records into uncompressed shards of SHARDS' lengths; returns the manifest
    with the splits as the pipeline records them (bytes: the serialised records' sizes)."""
    splits = {}
    for split, rows in records.items():
        lengths = SHARDS[split]
        assert sum(lengths) == len(rows)
        names, start, payload = [], 0, 0
        for index, length in enumerate(lengths):
            name = record_files(UNCOMPRESSED).name(split, index, len(lengths))
            with tf.io.TFRecordWriter(str(folder / name)) as writer:
                for row in rows[start : start + length]:
                    data = tf.train.Example(
                        features=tf.train.Features(feature={k: _feature(v) for k, v in row.items()})
                    ).SerializeToString()
                    writer.write(data)
                    payload += len(data)
            names.append(name)
            start += length
        splits[split] = SplitInfo(split, len(rows), tuple(names), bytes=payload, shard_lengths=lengths)
    n = sum(len(rows) for rows in records.values())
    return dataclasses.replace(manifest, splits=splits, counts=Counts(n, n, 0, 0, 0), compression=UNCOMPRESSED)


def _image_records() -> dict[str, list[dict]]:
    """Sample images (JPEG and PNG) as the pipeline's image records."""
    files = [p for label in LABELS for p in sorted((SAMPLE / label).iterdir())[:3]][:7]
    rows = []
    for path in files:
        data = path.read_bytes()
        shape = tf.io.decode_image(data, expand_animations=False).shape
        rows.append(
            {
                "image/encoded": data,
                "image/format": b"JPEG" if path.suffix == ".jpg" else b"PNG",
                "image/height": int(shape[0]),
                "image/width": int(shape[1]),
                "image/channels": int(shape[2]),
                "image/class/label": LABELS.index(path.parent.name),
                "image/class/text": path.parent.name.encode(),
                "image/filename": str(path).encode(),
                "image/source_id": str(len(rows) + 1000).encode(),
            }
        )
    return {"train": rows[:5], "validation": rows[5:]}


def _tabular_records() -> dict[str, list[dict]]:
    """Tabular rows; `age`, `score` and `city` are missing from some (an empty CSV cell)."""
    rows = []
    for i in range(7):
        row = {"id": i, "point": [i * 1.5, -i * 0.25]}
        if i % 2:
            row["age"] = 20 + i
        if i % 3:
            row["score"] = i / 4
        if i != 4:
            row["city"] = f"town {i}".encode()
        rows.append(row)
    return {"train": rows[:5], "validation": rows[5:]}


def _manifest(kind: str, features: dict[str, FeatureSpec], **fields) -> Manifest:
    return Manifest(kind=kind, splits={}, features=features, counts=Counts(0, 0, 0, 0, 0), **fields)


IMAGE_MANIFEST = _manifest(
    "images",
    {key: FeatureSpec(key, dtype) for key, dtype in IMAGE_KEYS.values()},
    label_map=LABELS,
    image_keys={role: key for role, (key, _) in IMAGE_KEYS.items()},
)
# A dataset stored resized (config image.resize): its records also keep their original size.
ORIGINAL_KEYS = {
    "original_height": ("image/original/height", "int64"),
    "original_width": ("image/original/width", "int64"),
}
RESIZED_MANIFEST = _manifest(
    "images",
    {key: FeatureSpec(key, dtype) for key, dtype in (*IMAGE_KEYS.values(), *ORIGINAL_KEYS.values())},
    label_map=LABELS,
    image_keys={role: key for role, (key, _) in {**IMAGE_KEYS, **ORIGINAL_KEYS}.items()},
    options={"image": {"resize": {"shorter_side": 32, "longer_side": None}}},
)


def _resized_records() -> dict[str, list[dict]]:
    """_image_records with an original size twice the stored one."""
    records = _image_records()
    for rows in records.values():
        for row in rows:
            row["image/original/height"] = 2 * row["image/height"]
            row["image/original/width"] = 2 * row["image/width"]
    return records


TABULAR_MANIFEST = _manifest(
    "csv",
    {
        "id": FeatureSpec("id", "int64"),
        "point": FeatureSpec("point", "float32", shape=(2,)),
        "age": FeatureSpec("age", "int64", required=False),
        "score": FeatureSpec("score", "float32", required=False),
        "city": FeatureSpec("city", "string", required=False),
    },
)


@pytest.fixture
def tfds():
    return pytest.importorskip("tensorflow_datasets")


def _write_metadata(folder: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)


def _read(builder, split: str) -> list[dict]:
    return list(builder.as_dataset(split=split, shuffle_files=False).as_numpy_iterator())


def _nested(row: dict) -> dict:
    """A flat record as TFDS returns it: keys split on '/' into nested dicts."""
    out: dict = {}
    for key, value in row.items():
        *parents, leaf = key.split("/")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _assert_equal(read: dict, expected: dict, path: str = "") -> None:
    assert sorted(read) == sorted(expected), path
    for key, value in expected.items():
        if isinstance(value, dict):
            _assert_equal(read[key], value, f"{path}/{key}")
        else:
            np.testing.assert_array_equal(read[key], np.asarray(value, dtype=np.asarray(read[key]).dtype))
            if isinstance(value, float):  # float32 in the record: compare as float32, not as float64
                assert np.float32(read[key]) == np.float32(value), f"{path}/{key}"


def test_tfds_reads_every_image_record_with_its_values(tmp_path, tfds):
    records = _image_records()
    manifest = _write_dataset(tmp_path, records, IMAGE_MANIFEST)
    files = tfds_metadata(manifest)
    assert sorted(files) == [DATASET_INFO_NAME, FEATURES_NAME, "image-class-label.labels.txt"]
    _write_metadata(tmp_path, files)

    builder = tfds.builder_from_directory(str(tmp_path))
    for split, rows in records.items():
        info = builder.info.splits[split]
        assert info.num_examples == len(rows)
        assert list(info.shard_lengths) == list(SHARDS[split])
        assert int(info.num_bytes) == sum((tmp_path / shard).stat().st_size for shard in manifest.splits[split].shards)
        read = _read(builder, split)
        assert len(read) == len(rows)
        for got, row in zip(read, records[split], strict=True):
            _assert_equal(got, _nested(row))
    # A slice across the first shard boundary: right only if the per-shard counts are.
    assert [r["image"]["filename"] for r in _read(builder, "train[2:4]")] == [
        r["image/filename"] for r in records["train"][2:4]
    ]
    label = builder.info.features["image"]["class"]["label"]
    assert isinstance(label, tfds.features.ClassLabel)
    assert label.names == list(LABELS)
    assert [label.int2str(r["image"]["class"]["label"]) for r in _read(builder, "train")] == [
        r["image/class/text"].decode() for r in records["train"]
    ]


def test_tfds_reads_the_original_size_of_resized_records(tmp_path, tfds):
    """image/original/height and width, int64 scalars, nest under image/original beside the others."""
    records = _resized_records()
    manifest = _write_dataset(tmp_path, records, RESIZED_MANIFEST)
    _write_metadata(tmp_path, tfds_metadata(manifest))
    builder = tfds.builder_from_directory(str(tmp_path))
    original = builder.info.features["image"]["original"]
    assert [(original[k].shape, original[k].dtype) for k in ("height", "width")] == [((), np.int64)] * 2
    for split, rows in records.items():
        read = _read(builder, split)
        assert len(read) == len(rows)
        for got, row in zip(read, rows, strict=True):
            _assert_equal(got, _nested(row))


def test_tfds_reads_tabular_records_with_optional_features(tmp_path, tfds):
    records = _tabular_records()
    manifest = _write_dataset(tmp_path, records, TABULAR_MANIFEST)
    files = tfds_metadata(manifest)
    assert sorted(files) == [DATASET_INFO_NAME, FEATURES_NAME]
    _write_metadata(tmp_path, files)

    builder = tfds.builder_from_directory(str(tmp_path))
    # TFDS reads an absent optional feature as its sentinel: b"", or the dtype's minimum.
    missing = {"age": np.iinfo(np.int64).min, "score": np.finfo(np.float32).min, "city": b""}
    for split, rows in records.items():
        read = _read(builder, split)
        assert len(read) == len(rows)
        for got, row in zip(read, rows, strict=True):
            _assert_equal(got, {**missing, **row})
    assert builder.info.features["point"].shape == (2,)


def test_the_files_are_what_tfds_write_metadata_writes(tmp_path, tfds):
    """Our files, byte for byte, against TFDS's writer given the same dataset and features."""
    image_features = {
        "image": {
            "encoded": tfds.features.Tensor(shape=(), dtype=np.str_),
            "format": tfds.features.Tensor(shape=(), dtype=np.str_),
            "height": tfds.features.Tensor(shape=(), dtype=np.int64),
            "width": tfds.features.Tensor(shape=(), dtype=np.int64),
            "channels": tfds.features.Tensor(shape=(), dtype=np.int64),
            "filename": tfds.features.Tensor(shape=(), dtype=np.str_),
            "source_id": tfds.features.Tensor(shape=(), dtype=np.str_),
            "class": {
                "label": tfds.features.ClassLabel(names=list(LABELS)),
                "text": tfds.features.Tensor(shape=(), dtype=np.str_),
            },
        }
    }
    for kind, records, manifest, features in (
        (
            "images",
            _image_records(),
            IMAGE_MANIFEST,
            image_features,
        ),
        (
            "images resized",
            _resized_records(),
            RESIZED_MANIFEST,
            {
                "image": {
                    **image_features["image"],
                    "original": {side: tfds.features.Tensor(shape=(), dtype=np.int64) for side in ("height", "width")},
                }
            },
        ),
        (
            "csv",
            _tabular_records(),
            TABULAR_MANIFEST,
            {
                "id": tfds.features.Tensor(shape=(), dtype=np.int64),
                "point": tfds.features.Tensor(shape=(2,), dtype=np.float32),
                "age": tfds.features.Tensor(shape=(), dtype=np.int64, optional=True),
                "score": tfds.features.Tensor(shape=(), dtype=np.float32, optional=True),
                "city": tfds.features.Tensor(shape=(), dtype=np.str_, optional=True),
            },
        ),
    ):
        ours, theirs = tmp_path / kind / "ours", tmp_path / kind / "theirs"
        ours.mkdir(parents=True)
        manifest = _write_dataset(ours, records, manifest)
        shutil.copytree(ours, theirs)
        _write_metadata(ours, tfds_metadata(manifest))
        split_infos = [
            tfds.core.SplitInfo(
                name=split,
                shard_lengths=list(info.shard_lengths),
                num_bytes=sum((theirs / shard).stat().st_size for shard in info.shards),
                filename_template=tfds.core.ShardedFileTemplate(data_dir=theirs, template=FILEPATH_TEMPLATE),
            )
            for split, info in manifest.splits.items()
        ]
        tfds.folder_dataset.write_metadata(
            data_dir=theirs, features=features, split_infos=split_infos, filename_template=FILEPATH_TEMPLATE
        )
        written = {p.name: p.read_text() for p in theirs.iterdir() if not p.name.endswith(".tfrecord")}
        assert written == {p.name: p.read_text() for p in ours.iterdir() if not p.name.endswith(".tfrecord")}, kind


def test_a_name_and_description_reach_tfds(tmp_path, tfds):
    manifest = _write_dataset(tmp_path, _tabular_records(), TABULAR_MANIFEST)
    _write_metadata(tmp_path, tfds_metadata(manifest, "my_rows", version="2.1.0", description="rows of a CSV"))
    builder = tfds.builder_from_directory(str(tmp_path))
    assert (builder.name, str(builder.info.version), builder.info.description) == ("my_rows", "2.1.0", "rows of a CSV")
    assert len(_read(builder, "train")) == 5


def test_a_label_with_an_offset_stays_a_plain_integer(tmp_path, tfds):
    """Labels 1..N (ImageNet-style readers) would name the wrong classes through label_map."""
    records = _image_records()
    for rows in records.values():
        for row in rows:
            row["image/class/label"] += 1
    offset = dataclasses.replace(IMAGE_MANIFEST, label_offset=1)
    manifest = _write_dataset(tmp_path, records, offset)
    files = tfds_metadata(manifest)
    assert sorted(files) == [DATASET_INFO_NAME, FEATURES_NAME]
    _write_metadata(tmp_path, files)
    builder = tfds.builder_from_directory(str(tmp_path))
    assert not isinstance(builder.info.features["image"]["class"]["label"], tfds.features.ClassLabel)
    assert [r["image"]["class"]["label"] for r in _read(builder, "train")] == [
        r["image/class/label"] for r in records["train"]
    ]


def _described(manifest: Manifest, **split_fields) -> Manifest:
    split = SplitInfo("train", 5, ("train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"), 100, {}, (3, 2))
    split = dataclasses.replace(split, **split_fields)
    return dataclasses.replace(manifest, splits={"train": split}, compression=UNCOMPRESSED)


def test_gzip_shards_are_refused():
    with pytest.raises(ValueError, match="TFDS cannot read GZIP"):
        tfds_metadata(dataclasses.replace(_described(IMAGE_MANIFEST), compression=GZIP))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"shard_lengths": ()}, "no per-shard record counts"),
        ({"shard_lengths": (5,)}, "1 shard lengths for 2 shards"),
        ({"shard_lengths": (3, 3)}, "shards hold 6 records, the split 5"),
        ({"shards": ("train-00000-of-00002.tfrecord.gz", "train-00001-of-00002.tfrecord.gz")}, "TFDS reads"),
        ({"shards": ("train-00001-of-00002.tfrecord", "train-00000-of-00002.tfrecord")}, "TFDS reads"),
    ],
)
def test_splits_tfds_would_misread_are_refused(fields, message):
    with pytest.raises(TfdsMetadataError, match=message):
        tfds_metadata(_described(IMAGE_MANIFEST, **fields))


@pytest.mark.parametrize("keys", [("a", "a/b"), ("a/b/c", "a/b"), ("a//b",), ("/a",), ("a/",)])
def test_keys_that_do_not_nest_are_refused(keys):
    manifest = dataclasses.replace(TABULAR_MANIFEST, features={k: FeatureSpec(k, "int64") for k in keys})
    with pytest.raises(TfdsMetadataError, match="feature"):
        tfds_metadata(_described(manifest))


def test_label_names_that_tfds_would_not_read_back_keep_a_plain_label():
    for names in (("a", " b"), ("a", "b\nc"), ("a", "")):
        files = tfds_metadata(_described(dataclasses.replace(IMAGE_MANIFEST, label_map=names)))
        assert sorted(files) == [DATASET_INFO_NAME, FEATURES_NAME]
        assert "ClassLabel" not in files[FEATURES_NAME]
    files = tfds_metadata(_described(IMAGE_MANIFEST), class_label=False)
    assert "ClassLabel" not in files[FEATURES_NAME]
