"""TFDS metadata for an uncompressed dataset: the files `tfds.builder_from_directory(DEST)` reads
beside the shards, so `tfds.builder_from_directory(DEST).as_dataset(split="train")` reads every record
of TFRecord shards, and `.as_data_source(split="train")` every record of ArrayRecord shards (format:
array_record), with random access.

    dataset_info.json                 splits, records per shard, bytes, where the shards are
    features.json                     the features, as TFDS feature connectors
    <label path>.labels.txt           the class names, when the label is a ClassLabel (see below)

The text is exactly what `tfds.folder_dataset.write_metadata(data_dir=DEST, features=...,
split_infos=[tfds.core.SplitInfo(name, shard_lengths, num_bytes, filename_template)],
filename_template="{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}")` writes (`DatasetInfo.write_to_directory`):
dataset_info.json is `json_format.MessageToJson(DatasetInfo proto, sort_keys=True)`, features.json
`json.dumps(MessageToDict(FeaturesDict proto), indent=4, sort_keys=True)`. It is built here from
the manifest alone, with the standard library: the pipeline and its workers never import TFDS or
TensorFlow, and no shard is read again (records per shard come from the read-back, the
manifest's `shard_lengths`). tests/test_tfds_metadata.py compares it with TFDS's own writer.

How the manifest maps onto TFDS:
- Shards: TFDS finds them by `filepathTemplate` "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}", which names
  exactly our uncompressed shards (`train-00000-of-00002.tfrecord`, `.array_record`), `fileFormat`
  being the manifest's `file_format`. TFDS cannot read GZIP TFRecords (its tfrecord adapter opens
  files with no compression), so a GZIP manifest is refused.
- Keys with '/' become nested FeaturesDicts: `image/encoded` is {"image": {"encoded": ...}}. TFDS
  joins nested keys with '/' to build its `tf.io.parse_single_example` spec, so it parses our
  `image/encoded` feature and returns it as `example["image"]["encoded"]` (and the full size of
  images stored resized, `image/original/height`, as `example["image"]["original"]["height"]`). A
  key that is both a feature and the prefix of another (`a` and `a/b`), or has an empty part
  (`a//b`, `/a`), is refused.
- Every feature is a `Tensor` of its dtype and shape (string features are the raw bytes: images stay
  encoded, as in the shards, since a TFDS `Image` would decode and fix the channels). An optional
  feature (required=False) is `Tensor(optional=True)`: where a record lacks it TFDS reads its
  sentinel, b"" for strings, the dtype's minimum for numbers (int64 -2**63, float32 -3.4028235e38),
  not the 0 that `core.contract.features.MISSING_VALUES` fills in.
- The image label is a `ClassLabel` named by `label_map` (so `info.features[...].int2str(i)` is
  the class name) only while that is exact: the label is an int64 scalar holding the 0-based index
  into `label_map`. When the manifest gives the label an offset (`label_offset`, e.g. 1 for
  ImageNet-style readers), label i would name class i - offset, so the label stays a
  plain int64 Tensor, as it does when a class name would not survive TFDS's labels file (one name a
  line, stripped). ClassLabel only decodes as int64: the values read are the same either way.
"""

from __future__ import annotations

import json
import re

from core.contract.layout import TFDS_LABELS_SUFFIX, TFDS_METADATA_FILES, TFRECORD, UNCOMPRESSED
from core.contract.manifest import FeatureSpec, Manifest

DATASET_INFO_NAME, FEATURES_NAME = TFDS_METADATA_FILES
LABELS_SUFFIX = TFDS_LABELS_SUFFIX
# TFDS's placeholders; with our split names, five-digit shard numbers and TFDS's names of the file
# formats (a manifest's file_format) it spells the names of our uncompressed shards.
FILEPATH_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"
DEFAULT_VERSION = "1.0.0"  # what write_metadata uses when the folder's name is not a version

_CLASSES = "tensorflow_datasets.core.features."
_TENSOR = _CLASSES + "tensor_feature.Tensor"
_FEATURES_DICT = _CLASSES + "features_dict.FeaturesDict"
_CLASS_LABEL = _CLASSES + "class_label_feature.ClassLabel"
_TFRECORD_FRAMING = 16  # bytes around each record: length (8), its CRC (4), the data's CRC (4)


class TfdsMetadataError(ValueError):
    """The dataset cannot be described to TFDS (compressed, shards not as TFDS names them, ...)."""


def tfds_metadata(
    manifest: Manifest,
    name: str | None = None,
    *,
    version: str = DEFAULT_VERSION,
    description: str = "",
    class_label: bool = True,
) -> dict[str, str]:
    """{file name: text} of the TFDS metadata to write in the dataset's folder, beside the shards.

    `name`: the dataset name TFDS reports (`builder.name`); None leaves it out, as write_metadata
    does for shards named without one. `class_label=False` keeps the label a plain int64 Tensor
    (and so writes no labels file). Raises TfdsMetadataError (a ValueError) for a dataset TFDS
    cannot read as described: GZIP shards, no per-shard record counts, other shard names."""
    if manifest.compression != UNCOMPRESSED:
        raise TfdsMetadataError(
            f"TFDS cannot read {manifest.compression} TFRecords: convert with `compression: none` "
            f"(manifest compression {UNCOMPRESSED!r}) to load the dataset with TFDS"
        )
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise TfdsMetadataError(f"TFDS version {version!r} is not of the form X.Y.Z")
    label = _class_label_key(manifest) if class_label else None
    files = {
        DATASET_INFO_NAME: dataset_info_json(manifest, name, version=version, description=description),
        FEATURES_NAME: features_json(manifest, class_label=class_label),
    }
    if label is not None:
        files[labels_file_name(label)] = "\n".join(manifest.label_map) + "\n"
    return files


def dataset_info_json(
    manifest: Manifest, name: str | None = None, *, version: str = DEFAULT_VERSION, description: str = ""
) -> str:
    """dataset_info.json: the DatasetInfo proto as TFDS writes it (proto3 JSON: camelCase names,
    int64 values as strings, empty fields left out, keys sorted, indent 2, ASCII, no final newline)."""
    info: dict = {
        "fileFormat": manifest.file_format,
        "splits": [_split_json(manifest, s) for s in manifest.splits],
        "version": version,
    }
    if name:
        info["name"] = name
    if description:
        info["description"] = description
    return json.dumps(info, indent=2, sort_keys=True)


def _split_json(manifest: Manifest, split_name: str) -> dict:
    split = manifest.splits[split_name]
    if split.shards and not split.shard_lengths:
        raise TfdsMetadataError(
            f"split {split_name}: the manifest has no per-shard record counts (shard_lengths, manifest format 2+)"
        )
    if len(split.shard_lengths) != len(split.shards):
        raise TfdsMetadataError(
            f"split {split_name}: {len(split.shard_lengths)} shard lengths for {len(split.shards)} shards"
        )
    if sum(split.shard_lengths) != split.records:
        raise TfdsMetadataError(
            f"split {split_name}: shards hold {sum(split.shard_lengths)} records, the split {split.records}"
        )
    files = manifest.record_files
    expected = tuple(files.name(split_name, i, len(split.shards)) for i in range(len(split.shards)))
    if split.shards != expected:
        raise TfdsMetadataError(
            f"split {split_name}: TFDS reads the shards {FILEPATH_TEMPLATE} names, {list(expected)}; "
            f"the manifest names {list(split.shards)}"
        )
    body: dict = {"filepathTemplate": FILEPATH_TEMPLATE, "name": split_name}
    if split.shard_lengths:
        body["shardLengths"] = [str(n) for n in split.shard_lengths]
    # The manifest counts serialised records; in a TFRecord file each one is framed by 16 bytes.
    framing = _TFRECORD_FRAMING if manifest.file_format == TFRECORD else 0
    num_bytes = split.bytes + framing * split.records if split.bytes else 0
    if num_bytes:
        body["numBytes"] = str(num_bytes)
    return body


def features_json(manifest: Manifest, *, class_label: bool = True) -> str:
    """features.json: the FeaturesDict of the manifest's features, keys split on '/' into nested
    FeaturesDicts, as `FeatureConnector.save_config` writes it."""
    label = _class_label_key(manifest) if class_label else None
    tree: dict = {}  # nested dicts of parts; a leaf is a _Leaf
    for key, spec in sorted(manifest.features.items()):
        parts = key.split("/")
        if "" in parts:
            raise TfdsMetadataError(f"feature {key!r}: an empty part between '/' has no TFDS feature name")
        node = tree
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if isinstance(node, _Leaf):
                raise TfdsMetadataError(f"feature {key!r}: {'/'.join(parts[: depth + 1])!r} is also a feature")
        if parts[-1] in node:
            raise TfdsMetadataError(f"feature {key!r}: it is also the prefix of other features")
        node[parts[-1]] = _Leaf(_class_label_json(len(manifest.label_map)) if key == label else _tensor_json(spec))
    return json.dumps(_features_dict_json(tree), indent=4, sort_keys=True)


def labels_file_name(key: str) -> str:
    """The file TFDS keeps a ClassLabel's names in: its path in the nested FeaturesDicts joined
    with '-' (`image/class/label` -> `image-class-label.labels.txt`)."""
    return "-".join(key.split("/")) + LABELS_SUFFIX


class _Leaf(dict):
    """One feature's JSON in the tree of nested FeaturesDicts."""


def _features_dict_json(tree: dict) -> dict:
    features = {k: dict(v) if isinstance(v, _Leaf) else _features_dict_json(v) for k, v in tree.items()}
    return {"featuresDict": {"features": features}, "pythonClassName": _FEATURES_DICT}


def _tensor_json(spec: FeatureSpec) -> dict:
    shape = {"dimensions": [str(d) for d in spec.shape]} if spec.shape else {}
    tensor: dict = {"dtype": spec.dtype, "encoding": "none", "shape": shape}
    if not spec.required:
        tensor["optional"] = True
    return {"pythonClassName": _TENSOR, "tensor": tensor}


def _class_label_json(num_classes: int) -> dict:
    return {"classLabel": {"numClasses": str(num_classes)}, "pythonClassName": _CLASS_LABEL}


def _class_label_key(manifest: Manifest) -> str | None:
    """The label's key when it can be an exact ClassLabel named by `label_map`, else None."""
    key = manifest.image_keys.get("label")
    spec = manifest.features.get(key) if key else None
    names = manifest.label_map
    if not (manifest.is_image_dataset and spec and names):
        return None
    if spec.dtype != "int64" or spec.shape != () or not spec.required:
        return None
    if manifest.label_offset:
        return None  # label i names label_map[i - offset]: a ClassLabel would name the wrong class
    # TFDS reads the names back one a line, stripped, blank lines dropped.
    if len(set(names)) != len(names) or any(n != n.strip() or not n or "\n" in n or "\r" in n for n in names):
        return None
    return key
