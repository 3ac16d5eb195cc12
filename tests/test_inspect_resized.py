"""`inspect` of a dataset stored resized (config image.resize): the summary says how images are
stored and where their full sizes are; `--verify` passes a real conversion and names a record whose
stored size is not what the bound makes of its original size; the contact sheet captions each tile
with its stored size and, where it differs, its original one; manifests without the setting are
shown as before."""

from __future__ import annotations

import io
import json
import pathlib
import shutil

import pytest
import tensorflow as tf
from PIL import Image

from core import storage
from core.contract.manifest import read_manifest
from pipeline import contact_sheet
from pipeline.cli import main as pipeline_main
from pipeline.commands import inspect
from tests.dataset_reader import load_manifest, read_split
from tests.trainer.conftest import SAMPLE

BOUND = 48
LINE = (
    f"  images stored with their shorter side at most {BOUND} px (image.resize), JPEG quality 90; full sizes in "
    "image/original/height, image/original/width"
)


def jpeg(size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.linear_gradient("L").convert("RGB").resize(size).save(buffer, "JPEG")
    return buffer.getvalue()


def png(size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.radial_gradient("L").resize(size).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def resized(tmp_path_factory) -> pathlib.Path:
    """Sample images (64x64: above the bound), a larger JPEG, and two within it (one exactly at
    it), stored with the shorter side at most BOUND px."""
    root = tmp_path_factory.mktemp("resize_in")
    for label in ("circle", "square"):
        (root / label).mkdir()
        for path in sorted((SAMPLE / "images" / label).iterdir())[:4]:
            shutil.copy(path, root / label / path.name)
    (root / "circle" / "large.jpg").write_bytes(jpeg((160, 120)))
    (root / "square" / "small.png").write_bytes(png((30, 20)))
    (root / "square" / "at_bound.png").write_bytes(png((BOUND, 70)))
    config = root.parent / "resize.yaml"
    config.write_text(json.dumps({"image": {"resize": {"shorter_side": BOUND}, "jpeg_quality": 90}}))
    out = tmp_path_factory.mktemp("resize_out") / "dataset"
    assert pipeline_main(["--config", str(config), "--input", str(root), "--output", str(out)]) == 0
    return out


def inspect_main(capsys, *argv) -> tuple[int, str]:
    code = inspect.main([str(a) for a in argv])
    return code, capsys.readouterr().out


def test_the_summary_says_how_images_are_stored(resized, capsys):
    code, out = inspect_main(capsys, resized)
    assert code == 0
    lines = out.splitlines()
    assert LINE in lines
    assert lines.index(LINE) < lines.index("  features:")
    assert "    image/original/height    int64" in lines and "    image/original/width     int64" in lines


def test_a_manifest_without_the_setting_has_no_such_line(resized, tmp_path, capsys):
    """As a manifest written before image.resize existed: no options.image.resize at all."""
    older = pathlib.Path(shutil.copytree(resized, tmp_path / "older"))
    body = json.loads((older / "manifest.json").read_text())
    del body["options"]["image"]["resize"]
    (older / "manifest.json").write_text(json.dumps(body))
    code, out = inspect_main(capsys, older)
    assert code == 0 and "image.resize" not in out and "images stored with" not in out
    body["options"]["image"]["resize"] = {"shorter_side": None, "longer_side": None}  # the setting off
    (older / "manifest.json").write_text(json.dumps(body))
    code, out = inspect_main(capsys, older)
    assert code == 0 and "image.resize" not in out


def by_source(dest: pathlib.Path) -> dict[str, tuple[str, int, dict]]:
    """(shard, record number in it, record) of each record, by its source's path below its class
    folder's parent (`circle/0001.jpg`)."""
    manifest = load_manifest(dest)
    found = {}
    for split in manifest.splits.values():
        records = read_split(dest, split.name)
        start = 0
        for shard, length in zip(split.shards, split.shard_lengths, strict=True):
            for i, record in enumerate(records[start : start + length]):
                path = pathlib.PurePath(record["image/filename"].decode())
                found[f"{path.parent.name}/{path.name}"] = (shard, i, record)
            start += length
    return found


def test_the_records_hold_what_the_bound_says(resized):
    records = {name: record for name, (_, _, record) in by_source(resized).items()}
    sizes = {
        name: ((r["image/width"], r["image/height"]), (r["image/original/width"], r["image/original/height"]))
        for name, r in records.items()
    }
    assert sizes["circle/large.jpg"] == ((64, 48), (160, 120))
    assert sizes["square/small.png"] == ((30, 20), (30, 20))
    assert sizes["square/at_bound.png"] == ((BOUND, 70), (BOUND, 70))
    assert sizes["circle/0001.jpg"] == ((BOUND, BOUND), (64, 64))


def test_verify_passes_a_resized_conversion(resized, capsys):
    code, out = inspect_main(capsys, resized, "--verify")
    assert code == 0, out
    assert "verify OK" in out


def rewrite(dest: pathlib.Path, shard: str, index: int, features: dict[str, int]) -> None:
    """Sets int64 `features` of record `index` of a GZIP shard, rewriting the shard."""
    path = str(dest / shard)
    records = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    example = tf.train.Example.FromString(records[index])
    for key, value in features.items():
        example.features.feature[key].int64_list.value[:] = [value]
    records[index] = example.SerializeToString()
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for record in records:
            writer.write(record)


@pytest.mark.parametrize(
    "source, original, problem",
    [
        ("circle/0001.jpg", (40, 40), "stored at 48x48, its original size 40x40: stored larger than its original"),
        (
            "square/small.png",
            (300, 200),
            "stored at 30x20, its original size 300x200: above the bound (image.resize: shorter side at most "
            "48 px), it should be stored at 72x48",
        ),
        (
            "circle/0001.jpg",
            (48, 50),
            "stored at 48x48, its original size 48x50: within the bound (image.resize: shorter side at most "
            "48 px), it should be stored at its original size",
        ),
        ("circle/large.jpg", (160, 121), "stored at 64x48, its original size 160x121: above the bound"),
    ],
    ids=["smaller_original", "above_not_scaled", "within_but_scaled", "rounded_wrong"],
)
def test_verify_names_a_record_stored_at_another_size_than_the_bound_says(
    resized, tmp_path, capsys, source, original, problem
):
    bad = pathlib.Path(shutil.copytree(resized, tmp_path / "bad"))
    shard, index, _ = by_source(bad)[source]
    rewrite(bad, shard, index, {"image/original/width": original[0], "image/original/height": original[1]})
    code, out = inspect_main(capsys, bad, "--verify")
    assert code == 1, out
    assert "VERIFY FAILED: 1 problem(s)" in out
    assert f"{shard}: record {index}: {problem}" in out


def test_contact_sheet_captions_show_the_stored_and_the_original_size(resized, tmp_path, capsys):
    manifest = read_manifest(str(resized), storage.text_reader(str(resized)))
    samples = contact_sheet.sample_images(str(resized), manifest, 11)
    records = {(shard, index): (name, record) for name, (shard, index, record) in by_source(resized).items()}
    captions = {}
    assert len(samples) == len(records)
    for sample in samples:
        name, record = records[sample["shard"], sample["record"]]
        assert (sample["width"], sample["height"]) == (record["image/width"], record["image/height"])
        assert (sample["original_width"], sample["original_height"]) == (
            record["image/original/width"],
            record["image/original/height"],
        )
        captions[name] = contact_sheet.size_caption(sample)
    assert captions["circle/large.jpg"] == "64x48 jpeg of 160x120"
    assert captions["circle/0001.jpg"] == "48x48 jpeg of 64x64"
    assert captions["square/small.png"] == "30x20 png"  # stored at its own size: no "of"
    path = tmp_path / "sheet.png"
    code, out = inspect_main(capsys, resized, "--contact_sheet", path, "--samples", 11)
    assert code == 0 and Image.open(path).size == (4 * contact_sheet.TILE_WIDTH, 3 * contact_sheet.TILE_HEIGHT)


@pytest.mark.parametrize(
    "sample, caption",
    [
        (
            {"width": 341, "height": 256, "format": "jpeg", "original_width": 1600, "original_height": 1200},
            "341x256 jpeg of 1600x1200",
        ),
        ({"width": 64, "height": 48, "format": "png", "original_width": 64, "original_height": 48}, "64x48 png"),
        ({"width": 64, "height": 48, "format": "png"}, "64x48 png"),  # a dataset not resized
        (
            {"width": 341, "height": 256, "format": "jpeg", "original_width": 16000, "original_height": 12000},
            "341x256 of 16000x12000",
        ),  # the format gives way to the sizes
    ],
)
def test_a_caption_fits_its_line(sample, caption):
    assert contact_sheet.size_caption(sample) == caption
    assert len(caption) <= contact_sheet.CAPTION_CHARS


def test_the_run_summary_says_how_images_are_stored(tmp_path, capsys):
    (tmp_path / "in" / "circle").mkdir(parents=True)
    (tmp_path / "in" / "circle" / "large.jpg").write_bytes(jpeg((160, 120)))
    config = tmp_path / "resize.yaml"
    config.write_text(json.dumps({"image": {"resize": {"shorter_side": BOUND}, "jpeg_quality": 90}}))
    argv = ["--config", config, "--input", tmp_path / "in", "--output", tmp_path / "out"]
    assert pipeline_main([str(a) for a in argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Dataset written to {tmp_path / 'out'}" and lines[1] == LINE
