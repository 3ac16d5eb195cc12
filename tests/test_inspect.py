"""`python -m pipeline inspect`: the summary, --verify (good output passes; truncated shards, bad
CRCs, wrong channels and wrong manifest counts fail, naming the shard and record), the contact
sheet, refresh roots (LATEST followed), rejected runs, gs://."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import pathlib
import shutil
import struct

import pytest
import tensorflow as tf
from PIL import Image

from core import storage
from core.contract.features import DEFAULT_IMAGE_KEYS, IMAGE_KEY_DTYPES
from core.contract.layout import GZIP, MANIFEST_NAME, REJECTED_MANIFEST_NAME, record_files
from core.contract.manifest import Counts, FeatureSpec, Manifest, SplitInfo, read_manifest
from core.contract.versions import LATEST_NAME
from pipeline import contact_sheet
from pipeline.cli import main as pipeline_main
from pipeline.commands import inspect
from pipeline.tfrecord_reader import read_records
from tests.subprocess_limits import run_pipeline
from tests.trainer.conftest import SAMPLE, converted


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> pathlib.Path:
    return converted("images", tmp_path_factory)  # 2 shards per split, shared with the trainer tests


@pytest.fixture(scope="module")
def tabular(tmp_path_factory) -> pathlib.Path:
    return converted("csv", tmp_path_factory)


@pytest.fixture(scope="module")
def with_errors(tmp_path_factory) -> pathlib.Path:
    """A few sample images plus two broken files: a dataset with an error report."""
    root = tmp_path_factory.mktemp("messy")
    for label in ("circle", "square", "triangle"):
        (root / label).mkdir()
        for path in sorted((SAMPLE / "images" / label).iterdir())[:6]:
            shutil.copy(path, root / label / path.name)
    (root / "circle" / "cut.jpg").write_bytes((SAMPLE / "images/circle/0001.jpg").read_bytes()[:300])
    (root / "square" / "page.jpg").write_bytes(b"<html><body>404 Not Found</body></html>")
    out = tmp_path_factory.mktemp("messy_out") / "dataset"
    assert pipeline_main(["--input", str(root), "--output", str(out), "--max_error_fraction", "0.5"]) == 0
    return out


def inspect_main(capsys, *argv) -> tuple[int, str]:
    code = inspect.main([str(a) for a in argv])
    return code, capsys.readouterr().out


def copy(dataset: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(dataset, tmp_path / "copy"))


def test_summary(images, capsys):
    manifest = json.loads((images / "manifest.json").read_text())
    code, out = inspect_main(capsys, images)
    assert code == 0
    for name, split in manifest["splits"].items():
        assert f"{name}" in out and str(split["records"]) in out
        for shard in split["shards"]:
            assert shard not in out  # the summary counts shards; --verify names them
    for label in ("circle", "square", "triangle"):
        counts = [str(manifest["splits"][s]["label_counts"][label]) for s in ("train", "validation")]
        assert any(line.split()[1:] == [label, *counts] for line in out.splitlines()), (label, counts)
    assert "image/encoded" in out and "listed 360, written 360" in out and "errors 0" in out
    assert "verify" not in out.lower()  # no verification unless asked


def test_summary_shows_error_counts_and_first_reasons(with_errors, capsys):
    code, out = inspect_main(capsys, with_errors, "--verify")
    assert code == 0, out
    assert "errors 2" in out
    assert "cut.jpg" in out and "page.jpg" in out  # the first reasons, from the error report
    assert "errors by stage:" in out
    assert "verify OK" in out  # 2 dead letters in the report, as the manifest counts


def test_verify_passes_on_good_output(images, tabular, capsys):
    code, out = inspect_main(capsys, images, "--verify")
    assert code == 0, out
    assert "verify OK: 360 record(s) in 4 shard(s)" in out and "decoded" in out
    code, out = inspect_main(capsys, tabular, "--verify")
    assert code == 0, out
    assert "verify OK: 1500 record(s) in 2 shard(s)" in out


def test_verify_names_a_truncated_shard(images, tmp_path, capsys):
    data = copy(images, tmp_path)
    shard = json.loads((data / "manifest.json").read_text())["splits"]["train"]["shards"][1]
    raw = (data / shard).read_bytes()
    (data / shard).write_bytes(raw[: len(raw) // 2])
    code, out = inspect_main(capsys, data, "--verify")
    assert code == 1
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("VERIFY FAILED")) + 1
    problems = [line.strip() for line in lines[first:]]
    assert problems[0].startswith(f"{shard}: record ") and "truncated" in problems[0], problems
    assert any(p.startswith("split train: the manifest says") and shard in p for p in problems), problems
    other = json.loads((data / "manifest.json").read_text())["splits"]["train"]["shards"][0]
    assert not any(p.startswith(other) for p in problems)  # the intact shard is not blamed


def test_verify_names_a_record_with_a_bad_crc(images, tmp_path, capsys):
    data = copy(images, tmp_path)
    shard = json.loads((data / "manifest.json").read_text())["splits"]["validation"]["shards"][0]
    raw = bytearray(gzip.decompress((data / shard).read_bytes()))
    # Walk to record 3 and flip a byte in the middle of its data.
    offset = 0
    for _ in range(3):
        (length,) = struct.unpack("<Q", raw[offset : offset + 8])
        offset += 12 + length + 4
    (length,) = struct.unpack("<Q", raw[offset : offset + 8])
    raw[offset + 12 + length // 2] ^= 0xFF
    (data / shard).write_bytes(gzip.compress(bytes(raw)))
    code, out = inspect_main(capsys, data, "--verify")
    assert code == 1
    assert f"{shard}: record 3: data CRC mismatch" in out


def test_verify_fails_on_wrong_manifest_counts(images, tmp_path, capsys):
    data = copy(images, tmp_path)
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["splits"]["validation"]["records"] += 1
    (data / "manifest.json").write_text(json.dumps(manifest))
    code, out = inspect_main(capsys, data, "--verify")
    assert code == 1
    line = next(text for text in out.splitlines() if "split validation: the manifest says" in text)
    records = manifest["splits"]["validation"]["records"]
    assert f"says {records} records, the shards hold {records - 1}" in line
    assert all(shard in line for shard in manifest["splits"]["validation"]["shards"])  # per-shard counts named

    manifest["splits"]["validation"]["records"] -= 1
    manifest["splits"]["train"]["label_counts"]["circle"] += 1
    manifest["counts"]["written"] += 5
    (data / "manifest.json").write_text(json.dumps(manifest))
    code, out = inspect_main(capsys, data, "--verify")
    assert code == 1
    assert "split train: label 'circle': the manifest says" in out
    assert "counts do not add up" in out


def test_verify_compares_each_shard_with_its_recorded_length(images, tmp_path, capsys):
    data = copy(images, tmp_path)
    manifest = json.loads((data / "manifest.json").read_text())
    train = manifest["splits"]["train"]
    assert len(train["shard_lengths"]) == len(train["shards"]) and sum(train["shard_lengths"]) == train["records"]
    train["shard_lengths"][0] += 1
    (data / "manifest.json").write_text(json.dumps(manifest))
    code, out = inspect_main(capsys, data, "--verify")
    assert code == 1
    held = train["shard_lengths"][0] - 1
    assert f"{train['shards'][0]}: the manifest says {held + 1} records, it holds {held}" in out


def test_verify_reports_a_missing_shard_and_a_stray_one(images, tmp_path, capsys):
    data = copy(images, tmp_path)
    shards = json.loads((data / "manifest.json").read_text())["splits"]["train"]["shards"]
    (data / shards[0]).rename(data / "train-00009-of-00010.tfrecord.gz")
    code, out = inspect_main(capsys, data, "--verify")
    assert code == 1
    assert f"{shards[0]}: listed in the manifest but missing" in out
    assert "train-00009-of-00010.tfrecord.gz: a shard file of split train that the manifest does not list" in out


@pytest.mark.parametrize("verify", [[], ["--verify"]])
def test_files_a_readers_split_pattern_picks_up_are_named_as_a_warning(images, tmp_path, verify):
    """`train-*`, as the TPU reference readers and Model Garden glob a split, takes any file so named
    for a shard: inspect says which and what such a reader would read; --verify still passes."""
    data = copy(images, tmp_path)
    (data / "train-notes.txt").write_text("not a record")
    (data / "validation-old.tfrecord.gz").write_bytes((data / "manifest.json").read_bytes())
    (data / "test-1.csv").write_text("a split the dataset does not have")
    result = run_pipeline(["inspect", data, *verify])
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("warning: ")]
    assert warnings == [
        f"warning: {data}/train-* also matches 1 file(s) the manifest does not list, ['train-notes.txt']: a reader "
        "that globs it reads them as records of split train (and fails on any that is not one); remove them, or "
        "read the shards the manifest lists",
        f"warning: {data}/validation-* also matches 1 file(s) the manifest does not list, "
        "['validation-old.tfrecord.gz']: a reader that globs it reads them as records of split validation (and "
        "fails on any that is not one); remove them, or read the shards the manifest lists",
    ]
    assert ("verify OK" in result.stdout) == bool(verify)


def png(mode: str, size: tuple[int, int] = (8, 6)) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, 128).save(buffer, format="PNG")
    return buffer.getvalue()


def image_example(data: bytes, height: int, width: int, channels: int, label_id: int, label: str) -> bytes:
    """A record as the writer makes one (tf.train.Example under DEFAULT_IMAGE_KEYS), any values."""
    keys = DEFAULT_IMAGE_KEYS

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    def strings(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    feature = {
        keys["encoded"]: strings(data),
        keys["format"]: strings(b"png"),
        keys["height"]: ints(height),
        keys["width"]: ints(width),
        keys["channels"]: ints(channels),
        keys["label"]: ints(label_id),
        keys["text"]: strings(label.encode()),
        keys["filename"]: strings(f"/in/{label}/{label_id}.png".encode()),
        keys["source_id"]: strings(str(label_id).encode()),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_image_dataset(folder: pathlib.Path, records: list[tuple[bytes, int]]) -> pathlib.Path:
    """A one-shard image dataset built by hand: one record per (PNG bytes, recorded channels),
    labelled by position (even 'a', odd 'b'), with its manifest."""
    folder.mkdir(parents=True)
    shard = record_files(GZIP).name("train", 0, 1)
    label_map = ("a", "b")
    with tf.io.TFRecordWriter(str(folder / shard), tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for i, (data, channels) in enumerate(records):
            height, width = Image.open(io.BytesIO(data)).size[::-1]
            writer.write(image_example(data, height, width, channels, i % 2, label_map[i % 2]))
    labels = [label_map[i % 2] for i in range(len(records))]
    n = len(records)
    manifest = Manifest(
        kind="images",
        splits={"train": SplitInfo("train", n, (shard,), label_counts={x: labels.count(x) for x in label_map})},
        features={key: FeatureSpec(key, IMAGE_KEY_DTYPES[role]) for role, key in DEFAULT_IMAGE_KEYS.items()},
        counts=Counts(listed=n, written=n, converted=0, skipped=0, errors=0),
        label_map=label_map,
        image_keys=dict(DEFAULT_IMAGE_KEYS),
        max_error_fraction=0.01,
    )
    (folder / MANIFEST_NAME).write_text(manifest.to_json())
    return folder


def test_verify_compares_decoded_channels_with_the_recorded_ones(tmp_path, capsys):
    """A grey PNG decodes to 1 channel: a record claiming 3 is named, with both values."""
    good = write_image_dataset(tmp_path / "good", [(png("RGB"), 3), (png("L"), 1), (png("RGBA"), 4)])
    code, out = inspect_main(capsys, good, "--verify")
    assert code == 0, out  # the hand-built dataset is sound but for what the next one changes

    bad = write_image_dataset(tmp_path / "bad", [(png("RGB"), 3), (png("L"), 3), (png("RGBA"), 4)])
    code, out = inspect_main(capsys, bad, "--verify")
    assert code == 1, out
    assert "VERIFY FAILED: 1 problem(s)" in out
    assert f"{record_files(GZIP).name('train', 0, 1)}: record 1: decoded channels 1 differs from the recorded 3" in out


@pytest.fixture(scope="module")
def refresh_root(tmp_path_factory) -> pathlib.Path:
    """A refresh ROOT with one version that LATEST names, made by `python -m pipeline refresh`."""
    source = tmp_path_factory.mktemp("refresh_in")
    for label in ("circle", "square", "triangle"):
        (source / label).mkdir()
        for path in sorted((SAMPLE / "images" / label).iterdir())[:3]:
            shutil.copy(path, source / label / path.name)
    root = tmp_path_factory.mktemp("refresh_out") / "root"
    assert pipeline_main(["refresh", "--input", str(source), "--output", str(root)]) == 0
    return root


def test_a_refresh_root_is_inspected_at_the_version_latest_names(refresh_root, capsys):
    version = (refresh_root / LATEST_NAME).read_text().strip()
    code, out = inspect_main(capsys, refresh_root)
    assert code == 0, out
    assert f"{refresh_root}/LATEST names version {version}: inspecting {refresh_root}/{version}" in out
    assert f"Dataset {refresh_root}/{version}" in out and "listed 9, written 9" in out
    code, out = inspect_main(capsys, refresh_root, "--verify")
    assert code == 0, out
    assert f"LATEST names version {version}" in out and "verify OK: 9 record(s)" in out


def rejected_copy(dataset: pathlib.Path, tmp_path: pathlib.Path, reasons: tuple[str, ...]) -> pathlib.Path:
    """The dataset as a rejected run leaves it: manifest.rejected.json (with `reasons`), no
    manifest.json and no shards, the error report kept."""
    data = copy(dataset, tmp_path)
    manifest = read_manifest(str(data), storage.text_reader(str(data)))
    rejected = dataclasses.replace(manifest, rejected=reasons, max_error_fraction=0.05)
    (data / REJECTED_MANIFEST_NAME).write_text(rejected.to_json())
    (data / MANIFEST_NAME).unlink()
    for split in manifest.splits.values():
        for shard in split.shards:
            (data / shard).unlink()
    return data


REASON = "errors 2 of 20 sources (10.00%) exceed the error budget of 5.00%"


def test_a_rejected_run_is_shown_as_rejected_and_exits_1(with_errors, tmp_path, capsys):
    data = rejected_copy(with_errors, tmp_path, (REASON,))
    manifest = json.loads((data / REJECTED_MANIFEST_NAME).read_text())
    code, out = inspect_main(capsys, data)
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith(f"REJECTED: {data} ") and lines[1] == f"  - {REASON}", out
    c = manifest["counts"]
    assert f"listed {c['listed']}, written {c['written']}" in out and f"errors {c['errors']}" in out
    assert all(name in out for name in manifest["error_files"])
    assert "cut.jpg" in out and "page.jpg" in out  # the first reasons, from the kept error report
    assert "budget 5.00%, EXCEEDED" in out


def test_verify_refuses_a_rejected_run_in_one_line(with_errors, tmp_path, capsys):
    data = rejected_copy(with_errors, tmp_path, (REASON, "the job accounted for 19 sources, 20 were listed"))
    code, out = inspect_main(capsys, data, "--verify")
    assert code == 1, out
    assert out.strip() == (
        f"VERIFY REFUSED: {data} holds a rejected run, not a dataset: "
        f"{REASON}; the job accounted for 19 sources, 20 were listed"
    )


def test_reader_matches_tensorflow(images):
    manifest = json.loads((images / "manifest.json").read_text())
    for shard in manifest["splits"]["train"]["shards"]:
        ours = list(read_records(str(images / shard), inside=None))
        theirs = [r.numpy() for r in tf.data.TFRecordDataset(str(images / shard), compression_type="GZIP")]
        assert ours == theirs and ours


def filled_tiles(sheet: Image.Image) -> int:
    """Slots of the grid whose tile was drawn (tiles are dark, unused slots white)."""
    columns, rows = sheet.width // contact_sheet.TILE_WIDTH, sheet.height // contact_sheet.TILE_HEIGHT
    return sum(
        sheet.getpixel((c * contact_sheet.TILE_WIDTH + 2, r * contact_sheet.TILE_HEIGHT + 2))
        == contact_sheet.TILE_BACKGROUND
        for c in range(columns)
        for r in range(rows)
    )


@pytest.mark.parametrize("samples", [5, 9])
def test_contact_sheet_has_one_tile_per_sample(images, tmp_path, capsys, samples):
    path = tmp_path / "sheets" / "sheet.png"
    code, out = inspect_main(capsys, images, "--contact_sheet", path, "--samples", samples)
    assert code == 0
    sheet = Image.open(io.BytesIO(path.read_bytes()))
    assert sheet.format == "PNG"
    sheet.verify()
    sheet = Image.open(path).convert("RGB")
    columns, rows = contact_sheet.grid_shape(samples)
    assert (columns, rows) == {5: (3, 2), 9: (3, 3)}[samples]
    assert sheet.size == (columns * contact_sheet.TILE_WIDTH, rows * contact_sheet.TILE_HEIGHT)
    assert filled_tiles(sheet) == samples
    assert f"({samples} image(s)" in out


def test_contact_sheet_tiles_show_the_labelled_pictures(images):
    manifest = read_manifest(str(images), storage.text_reader(str(images)))
    samples = contact_sheet.sample_images(str(images), manifest, 4)
    assert [s["label"] for s in samples] == [manifest.label_map[s["label_id"]] for s in samples]
    assert all(s["image"].shape == (64, 64, 3) and (s["width"], s["height"]) == (64, 64) for s in samples)
    sheet = contact_sheet.contact_sheet(samples)
    # The first tile's picture area holds the (enlarged) first image: it is not the plain tile colour.
    tile = sheet.crop((8, 8, contact_sheet.THUMBNAIL - 8, contact_sheet.THUMBNAIL - 8))
    assert len(tile.getcolors(1 << 16)) > 20


def test_contact_sheet_needs_an_image_dataset(tabular, tmp_path, capsys):
    code = inspect.main([str(tabular), "--contact_sheet", str(tmp_path / "x.png")])
    assert code == 2
    assert "needs an image dataset" in capsys.readouterr().err


def test_missing_manifest(tmp_path, capsys):
    assert inspect.main([str(tmp_path)]) == 2
    assert "manifest.json not found" in capsys.readouterr().err


def test_on_gcs(images, with_errors, gcs_emulator, gcs_bucket, tmp_path, capsys):
    prefix = f"gs://{gcs_bucket}/datasets/shapes"
    gcs_emulator.upload_dir(images, prefix)
    sheet = f"gs://{gcs_bucket}/sheets/shapes.png"
    code, out = inspect_main(capsys, prefix, "--verify", "--contact_sheet", sheet, "--samples", 4)
    assert code == 0, out
    assert "verify OK: 360 record(s) in 4 shard(s)" in out
    png = Image.open(io.BytesIO(gcs_emulator.read_bytes(sheet)))
    assert png.format == "PNG" and png.size == (2 * contact_sheet.TILE_WIDTH, 2 * contact_sheet.TILE_HEIGHT)

    shard = json.loads((images / "manifest.json").read_text())["splits"]["validation"]["shards"][1]
    raw = (images / shard).read_bytes()
    gcs_emulator.upload_bytes(f"{prefix}/{shard}", raw[: len(raw) - 100])
    code, out = inspect_main(capsys, prefix, "--verify")
    assert code == 1
    assert f"{shard}: record " in out

    messy = f"gs://{gcs_bucket}/datasets/messy"
    gcs_emulator.upload_dir(with_errors, messy)
    code, out = inspect_main(capsys, messy, "--verify")
    assert code == 0, out
    assert "errors 2" in out and "cut.jpg" in out and "page.jpg" in out and "verify OK" in out
