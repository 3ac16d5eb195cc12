"""Reading a converted dataset back the way a consumer does: manifest, then tf.data over the
shards (compressed as the manifest says; ArrayRecord shards through Grain's ArrayRecordDataSource),
then tf.io.parse_example with specs built from the manifest's feature spec."""

from __future__ import annotations

import json
import pathlib

import jsonschema
import tensorflow as tf

from core.contract.features import parse_spec
from core.contract.manifest import Manifest, ManifestRejectedError, json_schema, read_manifest, read_rejected_manifest

_SCHEMA = jsonschema.Draft202012Validator(json_schema())


def _read_text(path: str) -> str | None:
    """A file's text; a manifest is validated against the schema the package ships as it is read,
    so every test that reads one back checks it."""
    file = pathlib.Path(path)
    if not file.exists():
        return None
    text = file.read_text()
    if file.name.startswith("manifest") and file.suffix == ".json":
        _SCHEMA.validate(json.loads(text))
    return text


def load_manifest(folder) -> Manifest:
    return read_manifest(str(folder), _read_text)


def load_rejected(folder) -> Manifest:
    """The manifest.rejected.json of an untrusted run (it must be there)."""
    rejected = read_rejected_manifest(str(folder), _read_text)
    assert rejected is not None, f"{folder} holds no manifest.rejected.json"
    return rejected


def read_split(folder, split: str) -> list[dict]:
    """Every record of a split, in shard order, as {feature: python value or None when absent}."""
    manifest = load_manifest(folder)
    files = [str(pathlib.Path(folder) / shard) for shard in manifest.splits[split].shards]
    if manifest.file_format == "array_record":
        dataset = tf.data.Dataset.from_tensor_slices(array_records(files) or tf.constant([], tf.string)).batch(256)
    else:
        dataset = tf.data.TFRecordDataset(files, compression_type=manifest.tf_compression_type).batch(256)
    specs = parse_spec(manifest.features.values(), tf)
    records = []
    for batch in dataset:
        parsed = tf.io.parse_example(batch, specs)
        dense = {
            k: (
                tf.sparse.to_dense(v, default_value=_empty(v.dtype)).numpy()
                if isinstance(v, tf.sparse.SparseTensor)
                else v.numpy(),
                _present(v),
            )
            for k, v in parsed.items()
        }
        for i in range(int(batch.shape[0])):
            records.append({k: (_py(values[i]) if present[i] else None) for k, (values, present) in dense.items()})
    return records


def array_records(files: list[str]) -> list[bytes]:
    """Every serialized record of ArrayRecord `files`, in order, by Grain's random access."""
    import grain  # only where a test reads ArrayRecord shards

    source = grain.sources.ArrayRecordDataSource(files)
    return [source[i] for i in range(len(source))]


def _empty(dtype):
    return "" if dtype == tf.string else 0


def _present(tensor):
    if not isinstance(tensor, tf.sparse.SparseTensor):
        return [True] * int(tensor.shape[0])
    present = [False] * int(tensor.dense_shape[0])
    for row in tensor.indices[:, 0].numpy():
        present[row] = True
    return present


def _py(value):
    """A numpy scalar or a one-value VarLen row as a plain Python value."""
    value = value.tolist() if hasattr(value, "tolist") else value
    return value[0] if isinstance(value, list) else value


def read_dead_letters(folder) -> list[dict]:
    """The dead letters of a dataset, or of a rejected run (whose report stays)."""
    try:
        manifest = load_manifest(folder)
    except ManifestRejectedError as e:
        manifest = e.manifest
    letters = []
    for name in manifest.error_files:
        letters += [json.loads(line) for line in (pathlib.Path(folder) / name).read_text().splitlines() if line]
    return letters
