"""image.resize end to end on the DirectRunner: a folder of sources larger and smaller than the
bound, turned and broken ones among them, converted on threads and in converting processes, read
back with TensorFlow record by record; and a refresh that re-runs when the size changes."""

from __future__ import annotations

import io
import json
import pathlib

import pytest
import tensorflow as tf
from PIL import Image, ImageOps

from pipeline.cli import main
from tests import broken_images as bi
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from transforms.image_resize import Resize

BOUND = 96
SOURCES = {  # larger than the bound: stored scaled down as JPEG
    "cat/photo.jpg": lambda: bi.image_bytes("JPEG", "RGB", (400, 300), quality=90),
    "cat/sideways.jpg": lambda: _exif_turned(bi.image_bytes("JPEG", "RGB", (320, 200)), 6),
    "cat/scan.tiff": lambda: bi.image_bytes("TIFF", "RGB", (250, 500)),
    "dog/drawing.png": lambda: bi.image_bytes("PNG", "RGBA", (300, 260)),
    "dog/grey.jpg": lambda: bi.image_bytes("JPEG", "L", (200, 400)),
    "dog/animated.gif": lambda: bi.animated_bytes("GIF", "P", (220, 180)),
}
WITHIN = {  # within the bound: stored exactly as without the setting
    "cat/small.jpg": lambda: bi.image_bytes("JPEG", "RGB", (120, BOUND)),
    "dog/icon.png": lambda: bi.image_bytes("PNG", "P", (64, 48)),
}
BROKEN = {"dog/truncated.jpg": bi.truncated_jpeg, "cat/bomb.png": bi.bomb_png}


def _exif_turned(jpeg: bytes, orientation: int) -> bytes:
    im = Image.open(io.BytesIO(jpeg))
    exif = Image.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    im.save(buffer, "JPEG", quality=90, exif=exif.tobytes())
    return buffer.getvalue()


def write_input(root: pathlib.Path) -> dict[str, bytes]:
    written = {}
    for rel, make in {**SOURCES, **WITHIN, **BROKEN}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data := make())
        written[rel] = data
    return written


def write_config(path: pathlib.Path, resize: dict, **image) -> str:
    path.write_text(json.dumps({"kind": "images", "image": {"resize": resize, **image}}))  # YAML reads JSON
    return str(path)


def records_by_source(dest: pathlib.Path, input_root: pathlib.Path) -> dict[str, dict]:
    manifest = load_manifest(dest)
    prefix = f"{input_root}/"
    return {
        record["image/filename"].decode().removeprefix(prefix): record
        for split in manifest.splits
        for record in read_split(dest, split)
    }


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "converting processes"])
def test_larger_sources_are_stored_at_the_bound_and_the_rest_as_they_were(tmp_path, processes):
    sources = write_input(tmp_path / "in")
    config = write_config(tmp_path / "c.yaml", {"shorter_side": BOUND}, local_processes=processes)
    dest = tmp_path / "out"
    argv = ["--config", config, "--input", str(tmp_path / "in"), "--output", str(dest), "--max_error_fraction", "0.5"]
    assert main(argv) == 0
    manifest = load_manifest(dest)
    assert manifest.options["image"]["resize"] == {"shorter_side": BOUND, "longer_side": None}
    assert {"image/original/height", "image/original/width"} <= set(manifest.features)
    assert manifest.image_keys["original_width"] == "image/original/width"
    records = records_by_source(dest, tmp_path / "in")
    assert set(records) == set(SOURCES) | set(WITHIN)
    assert {letter["source"].removeprefix(f"{tmp_path}/in/") for letter in read_dead_letters(dest)} == set(BROKEN)
    for rel in SOURCES:
        record = records[rel]
        upright = ImageOps.exif_transpose(Image.open(io.BytesIO(sources[rel]))).size
        stored = Resize(shorter_side=BOUND).target(*upright)
        assert (record["image/original/width"], record["image/original/height"]) == upright, rel
        assert (record["image/width"], record["image/height"]) == stored, rel
        assert record["image/format"] == b"jpeg"
        decoded = tf.io.decode_image(record["image/encoded"], expand_animations=False).shape
        assert tuple(decoded) == (stored[1], stored[0], record["image/channels"]), rel
    for rel in WITHIN:
        record = records[rel]
        assert record["image/encoded"] == sources[rel]  # its own bytes: nothing lost to a second encoding
        size = Image.open(io.BytesIO(sources[rel])).size
        assert (record["image/original/width"], record["image/original/height"]) == size
        assert (record["image/width"], record["image/height"]) == size
    assert manifest.counts.converted == len(SOURCES)


def test_an_image_csv_is_stored_at_the_bound_too(tmp_path):
    sources = write_input(tmp_path / "in")
    rows = "".join(f"{rel},{rel.split('/')[0]}\n" for rel in sources)
    (tmp_path / "in" / "labels.csv").write_text("image_uri,label\n" + rows)
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"kind": "image_csv", "image": {"resize": {"longer_side": BOUND}}}))
    dest = tmp_path / "out"
    argv = ["--config", str(config), "--input", str(tmp_path / "in" / "labels.csv"), "--output", str(dest)]
    assert main([*argv, "--max_error_fraction", "0.5"]) == 0
    records = records_by_source(dest, tmp_path / "in")
    assert set(records) == set(SOURCES) | set(WITHIN)
    for rel, record in records.items():
        upright = ImageOps.exif_transpose(Image.open(io.BytesIO(sources[rel]))).size
        stored = Resize(longer_side=BOUND).target(*upright) or upright
        assert (record["image/width"], record["image/height"]) == stored, rel
        assert (record["image/original/width"], record["image/original/height"]) == upright, rel


def test_without_the_setting_records_have_no_original_size(tmp_path):
    write_input(tmp_path / "in")
    dest = tmp_path / "out"
    assert main(["--input", str(tmp_path / "in"), "--output", str(dest), "--max_error_fraction", "0.5"]) == 0
    manifest = load_manifest(dest)
    assert "original_height" not in manifest.image_keys
    assert not any(key.startswith("image/original/") for key in manifest.features)


def test_a_refresh_with_another_size_converts_again_and_one_with_the_same_does_not(tmp_path, capsys):
    write_input(tmp_path / "in")
    root = tmp_path / "root"

    def refresh(resize: dict) -> int:
        config = write_config(tmp_path / "c.yaml", resize)
        argv = ["refresh", "--config", config, "--input", str(tmp_path / "in"), "--output", str(root)]
        return main([*argv, "--max_error_fraction", "0.5"])

    def latest() -> str:
        return (root / "LATEST").read_text().strip()

    assert refresh({"shorter_side": BOUND}) == 0
    first = latest()
    capsys.readouterr()
    assert refresh({"shorter_side": BOUND}) == 0
    assert "nothing changed" in capsys.readouterr().out and latest() == first
    assert refresh({"longer_side": BOUND}) == 0
    second = latest()
    assert second != first
    widths = {r["image/width"] for r in records_by_source(root / second, tmp_path / "in").values()}
    assert max(widths) == BOUND
    capsys.readouterr()
    # Back to full size: converted again, and held, since the records lose their original-size
    # features, which a reader may use, until a person promotes it.
    assert refresh({}) == 4 and latest() == second
    assert "column 'image/original/height': int64 -> none (it disappeared)" in capsys.readouterr().out


def test_a_version_made_before_the_setting_existed_counts_as_made_without_it(tmp_path, capsys):
    """Its manifest's options lack image.resize: a refresh of unchanged input without the setting
    finds nothing changed, rather than converting everything again."""
    write_input(tmp_path / "in")
    root = tmp_path / "root"
    argv = ["refresh", "--input", str(tmp_path / "in"), "--output", str(root), "--max_error_fraction", "0.5"]
    assert main(argv) == 0
    version = (root / "LATEST").read_text().strip()
    manifest_path = root / version / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["options"]["image"]["resize"]
    manifest_path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(argv) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert (root / "LATEST").read_text().strip() == version


def _quantization(quality: int, mode: str) -> dict:
    """The quantization tables Pillow writes a JPEG of `quality` and `mode` with."""
    buffer = io.BytesIO()
    Image.new(mode, (16, 16)).save(buffer, "JPEG", quality=quality)
    return Image.open(buffer).quantization


@pytest.mark.parametrize(
    "image, stored_quality",
    [
        ({"resize": {"shorter_side": BOUND}}, 90),  # a training copy: FFCV's quality by default
        ({"resize": {"shorter_side": BOUND}, "jpeg_quality": 95}, 95),
        ({"jpeg_only": True}, 95),  # re-encodings without a resize stand in for the originals
        ({"jpeg_only": True, "jpeg_quality": 80}, 80),
    ],
    ids=["resized", "resized at 95", "re-encoded", "re-encoded at 80"],
)
def test_the_jpegs_written_are_of_the_quality_the_manifest_records(tmp_path, image, stored_quality):
    sources = write_input(tmp_path / "in")
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"kind": "images", "image": image}))
    dest = tmp_path / "out"
    argv = ["--config", str(config), "--input", str(tmp_path / "in"), "--output", str(dest)]
    assert main([*argv, "--max_error_fraction", "0.5"]) == 0
    assert load_manifest(dest).options["image"]["jpeg_quality"] == stored_quality
    records = records_by_source(dest, tmp_path / "in")
    encoded = {rel: record for rel, record in records.items() if record["image/encoded"] != sources[rel]}
    assert set(encoded) >= {"cat/scan.tiff", "dog/drawing.png"}  # each of these runs writes JPEGs of them
    for rel, record in encoded.items():
        assert record["image/format"] == b"jpeg", rel
        stored = Image.open(io.BytesIO(record["image/encoded"]))
        assert stored.quantization == _quantization(stored_quality, stored.mode), rel
