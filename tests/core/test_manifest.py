import json

import pytest

from core.contract.manifest import (
    Counts,
    FeatureSpec,
    Listing,
    Manifest,
    ManifestError,
    ManifestNotFoundError,
    SplitInfo,
    read_manifest,
)


def manifest(**changes):
    values = dict(
        kind="images",
        splits={"train": SplitInfo("train", 3, ("train-00000-of-00001.tfrecord.gz",), 100, {"cat": 3})},
        features={"image/encoded": FeatureSpec("image/encoded", "string")},
        counts=Counts(listed=5, written=3, converted=1, skipped=1, errors=1),
        label_map=("cat",),
        error_files=("errors-00000-of-00001.jsonl",),
        max_error_fraction=0.5,
        error_fraction=0.25,
        listing=Listing(files=6, bytes=1000, fingerprint="ab" * 32, sources=5),
    )
    values.update(changes)
    return Manifest(**values)


def test_round_trip():
    original = manifest(
        warnings=("column 'x' is stored as strings: ...",), copies_files=("copies-00000-of-00001.jsonl",)
    )
    assert Manifest.from_json(original.to_json()) == original
    body = json.loads(original.to_json())
    assert body["splits"]["train"]["shards"] == ["train-00000-of-00001.tfrecord.gz"]
    assert body["features"]["image/encoded"] == {"dtype": "string", "shape": [], "required": True}


def test_counts_reconcile():
    assert Counts(5, 3, 1, 1, 1).reconciles()
    assert not Counts(6, 3, 1, 1, 1).reconciles()
    assert not Counts(5, 3, 4, 1, 1).reconciles()  # converted must be a subset of written


def test_error_budget():
    assert not manifest().error_budget_exceeded
    assert manifest(max_error_fraction=0.1).error_budget_exceeded


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "manifest is not JSON: Expecting value"),
        ('{"format": "other"}', "not a tfrecord-examples manifest"),
        ('{"format": "tfrecord-examples", "format_version": 99}', "format_version"),
        ('{"format": "tfrecord-examples", "format_version": 1, "kind": "images"}', r"\$: lacks 'splits', 'features'"),
    ],
)
def test_bad_manifests(text, message):
    with pytest.raises(ManifestError, match=message):
        Manifest.from_json(text)


def test_unknown_dtype_rejected():
    with pytest.raises(ManifestError):
        FeatureSpec("x", "int32")


def test_read_manifest_names_the_file_it_could_not_read(tmp_path):
    def read_text(path):
        file = tmp_path / path.rsplit("/", 1)[1]
        return file.read_text() if file.exists() else None

    with pytest.raises(ManifestNotFoundError, match=f"{tmp_path}/manifest.json not found"):
        read_manifest(str(tmp_path), read_text)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match=f"{tmp_path}/manifest.json: manifest is not JSON"):
        read_manifest(str(tmp_path), read_text)
    (tmp_path / "manifest.json").write_text(manifest().to_json())
    assert read_manifest(str(tmp_path) + "/", read_text) == manifest()
