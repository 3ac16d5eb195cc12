"""Every reader profile on a messy corpus (tests/messy_corpus.py), converted through the real
pipeline: the reader's own decode and crops (tests/reader_replays.py) take every record, and every
source is a record or a dead letter, one naming the reader's limit where the reader could not take
it; so too with each profile storing images resized (image.resize), their records keeping the
sources' full sizes, which TFDS reads as well. DALI is not installed here (its wheels come from
NVIDIA's index); its profile is checked against what DALI's documentation says its decoder reads
and does."""

from __future__ import annotations

import io
import json
import pathlib

import pytest
import tensorflow as tf
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from pipeline.cli import main
from pipeline.config import load_config
from tests import broken_images as bi
from tests import reader_replays as replays
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from tests.messy_corpus import BROKEN, RECORD, TOO_SMALL, write_corpus
from transforms.image_check import BadImage, check_image
from transforms.image_resize import Resize

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "configs"
# Each profile and the replays of the readers it is for.
PROFILES = {
    "tpu_resnet.yaml": replays.TPU_RESNET,
    "model_garden.yaml": replays.MODEL_GARDEN,
}
TRACED = {profile: {name: replays.traced(r) for name, r in readers.items()} for profile, readers in PROFILES.items()}
# image.resize settings each profile also runs with. The corpus's 64x48 images (every format) and
# its larger JPEGs lie above both bounds, so they are stored scaled down (the EXIF-oriented ones
# turned upright first); its 16x12 and 2x2 JPEGs and its 1-px images lie within, stored as they are
# (or refused by min_side). Both are above the profiles' min_side, as config requires.
RESIZES = ({"shorter_side": 40}, {"longer_side": 60})
CASES = [(profile, resize) for profile in PROFILES for resize in (None, *RESIZES)]


def case_id(profile: str, resize: dict | None) -> str:
    return profile.removesuffix(".yaml") + ("".join(f"-{k}={v}" for k, v in resize.items()) if resize else "")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[pathlib.Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("messy") / "photos"
    return root, write_corpus(root)


@pytest.fixture(scope="module")
def converted(corpus, tmp_path_factory):
    """DEST of the corpus converted with a profile, and with `resize` added to its image settings
    (written as a copy of the profile), once per profile and resize."""
    done = {}

    def convert(profile: str, resize: dict | None = None) -> pathlib.Path:
        key = case_id(profile, resize)
        if key not in done:
            folder = tmp_path_factory.mktemp(key)
            config = CONFIGS / profile
            if resize:
                settings = yaml.safe_load(config.read_text())
                settings["image"]["resize"] = resize
                config = folder / profile
                config.write_text(json.dumps(settings))  # JSON is YAML
            argv = ["--config", str(config), "--input", str(corpus[0]), "--output", str(folder / "dataset")]
            # a third of the corpus is broken or too small on purpose
            assert main([*argv, "--max_error_fraction", "0.5"]) == 0
            done[key] = folder / "dataset"
        return done[key]

    return convert


def records(dest: pathlib.Path) -> list[dict]:
    return [record for split in load_manifest(dest).splits for record in read_split(dest, split)]


def relative(root: pathlib.Path, source: str) -> str:
    return pathlib.Path(source).relative_to(root).as_posix()


def fates_of(dest: pathlib.Path, root: pathlib.Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """(records, dead letters) by their source's path below root; no source is both or twice."""
    written = [(relative(root, r["image/filename"].decode()), r) for r in records(dest)]
    dead = [(relative(root, letter["source"]), letter) for letter in read_dead_letters(dest)]
    by_source = dict(written + dead)
    assert len(by_source) == len(written) + len(dead)
    return dict(written), dict(dead)


@pytest.mark.parametrize("profile, resize", CASES, ids=[case_id(*case) for case in CASES])
def test_the_readers_take_every_record_and_the_rest_are_dead_letters_naming_why(profile, resize, corpus, converted):
    root, fates = corpus
    dest = converted(profile, resize)
    written, dead = fates_of(dest, root)
    assert sorted(written) == sorted(name for name, fate in fates.items() if fate == RECORD)
    assert sorted(dead) == sorted(name for name, fate in fates.items() if fate != RECORD)
    min_side = load_config(str(CONFIGS / profile)).image.min_side
    for name, letter in dead.items():
        if fates[name] == TOO_SMALL:
            width, height = Image.open(root / name).size
            assert letter["stage"] == "dimensions"
            assert f"{width}x{height}: its shorter side, 1 px, is below {min_side} px" in letter["reason"]
            assert "(image.min_side)" in letter["reason"]
        else:
            assert fates[name] == BROKEN and "image.min_side" not in letter["reason"]

    failures = []
    for name, record in written.items():
        image_bytes = tf.constant(record["image/encoded"])
        stored = [record["image/height"], record["image/width"]]
        if tf.image.extract_jpeg_shape(image_bytes).numpy().tolist()[:2] != stored:
            failures.append((name, "stored height and width", "not what the JPEG holds"))
        for reader, replay in TRACED[profile].items():
            try:
                shape = tuple(replay(image_bytes).shape)
            except (tf.errors.OpError, ValueError) as e:
                failures.append((name, reader, str(e).strip().splitlines()[-1][:200]))
                continue
            if shape != (224, 224, 3):
                failures.append((name, reader, f"shape {shape}"))
    assert failures == []
    if resize:
        assert_stored_sizes(root, written, Resize(**resize), upright=False)


def assert_stored_sizes(root: pathlib.Path, written: dict[str, dict], resize: Resize, upright: bool) -> None:
    """Each record of a source above the bound holds it scaled down to the bound, turned as its
    EXIF orientation says, and its full size turned so; one within the bound, the source as the
    profile stores it (turned only where `upright`) and that same size as its original. Both kinds
    are in the corpus."""
    within = 0
    for name, record in written.items():
        with Image.open(root / name) as source:
            size, shown = source.size, ImageOps.exif_transpose(source).size
        stored = (record["image/width"], record["image/height"])
        original = (record["image/original/width"], record["image/original/height"])
        if resize.target(*size):
            assert (original, stored) == (shown, resize.target(*shown)), name
        else:
            within += 1
            assert original == stored == (shown if upright else size), name
    assert 0 < within < len(written)


def test_model_garden_s_detection_decoder_takes_every_record(corpus, converted):
    dest = converted("model_garden.yaml")
    decode = replays.traced(replays.mg_detection_image)
    for record in records(dest):
        image = decode(tf.constant(record["image/encoded"]))
        assert tuple(image.shape) == (record["image/height"], record["image/width"], 3), record["image/filename"]


@pytest.mark.parametrize("resize", [None, RESIZES[0]], ids=["as_is", case_id("", RESIZES[0]).lstrip("-")])
def test_the_dali_profile_stores_what_dali_decodes(resize, corpus, converted):
    """DALI's image decoder reads JPEG (not GIF, nor WebP beyond the simple format) and turns each
    image as its EXIF orientation says (adjust_orientation=True): every record must be a JPEG whose
    stored height and width are those of its source as a viewer shows it (or, resized, of that
    scaled down), with no orientation left for DALI to apply."""
    root, fates = corpus
    written, dead = fates_of(converted("dali.yaml", resize), root)
    assert sorted(dead) == sorted(name for name, fate in fates.items() if fate == BROKEN)
    for name, record in written.items():
        stored = Image.open(io.BytesIO(record["image/encoded"]))
        assert stored.format in ("JPEG", "MPO") and record["image/format"] == b"jpeg", name  # MPO: a JPEG and more
        assert stored.getexif().get(0x0112, 1) == 1, name
        assert (record["image/width"], record["image/height"]) == stored.size, name
        if not resize:
            with Image.open(root / name) as source:
                shown = ImageOps.exif_transpose(source)  # what DALI decodes: the source as a viewer shows it
                assert stored.size == shown.size, name
    if resize:
        assert_stored_sizes(root, written, Resize(**resize), upright=True)
    turned = [name for name in written if name.endswith(("exif_5.jpg", "exif_6.jpg", "exif_7.jpg", "exif_8.jpg"))]
    assert len(turned) == 4
    portrait = (40, 53) if resize else (48, 64)
    assert all((written[name]["image/width"], written[name]["image/height"]) == portrait for name in turned)


@pytest.mark.parametrize("profile", PROFILES)
def test_tfds_reads_every_resized_record_with_its_full_size(profile, corpus, converted):
    """The profiles write uncompressed shards, so the run writes TFDS's metadata beside them: TFDS
    reads every record, the full size as int64 scalars nested as `image/original/...`."""
    tfds = pytest.importorskip("tensorflow_datasets")
    dest = converted(profile, RESIZES[0])
    manifest = load_manifest(dest)
    builder = tfds.builder_from_directory(str(dest))
    original = builder.info.features["image"]["original"]
    assert {side: (original[side].shape, original[side].dtype) for side in ("height", "width")} == {
        "height": ((), tf.int64),
        "width": ((), tf.int64),
    }
    for split in manifest.splits:
        expected = {
            r["image/filename"]: (r["image/original/height"], r["image/original/width"], r["image/height"])
            for r in read_split(dest, split)
        }
        read = {
            r["image"]["filename"]: (
                r["image"]["original"]["height"],
                r["image"]["original"]["width"],
                r["image"]["height"],
            )
            for r in builder.as_dataset(split=split, shuffle_files=False).as_numpy_iterator()
        }
        assert read == expected and len(read) == manifest.splits[split].records


# What the issue saw: each reader fails on some sources stored as they are, which the profiles
# re-encode (jpeg_only) or refuse (min_side). Here the replays run on the sources' own bytes.
UNREADABLE = [
    ("a 1x1 JPEG", lambda: bi.image_bytes("JPEG", "RGB", (1, 1)), "tpu_resnet.yaml"),
    ("a 1x1 JPEG", lambda: bi.image_bytes("JPEG", "RGB", (1, 1)), "model_garden.yaml"),
    ("a 1x40 PNG", lambda: bi.image_bytes("PNG", "RGB", (1, 40)), "model_garden.yaml"),
    ("a GIF", lambda: bi.image_bytes("GIF", "P"), "model_garden.yaml"),
    ("a still WebP", lambda: bi.image_bytes("WEBP", "RGB"), "model_garden.yaml"),
    ("a PNG", lambda: bi.image_bytes("PNG", "RGB"), "tpu_resnet.yaml"),
]


@pytest.mark.parametrize("what, make, profile", UNREADABLE, ids=[f"{w} for {p}" for w, _, p in UNREADABLE])
def test_every_replayed_reader_fails_on_what_its_profile_changes(what, make, profile):
    data = tf.constant(make())
    for replay in TRACED[profile].values():
        with pytest.raises(tf.errors.InvalidArgumentError):
            replay(data)


@pytest.mark.parametrize("profile", PROFILES)
@settings(max_examples=30, deadline=None)
@given(width=st.integers(1, 40), height=st.integers(1, 40))
def test_min_side_is_exactly_what_the_readers_crops_need(profile, width, height):
    """A JPEG of any size: the profile keeps it if and only if every reader's crops take it."""
    data = bi.image_bytes("JPEG", "RGB", (width, height))
    encoding = load_config(str(CONFIGS / profile)).image.encoding
    try:
        check_image(data, 10_000_000, encoding)
        kept = True
    except BadImage:
        kept = False
    read = []
    for replay in TRACED[profile].values():
        try:
            read.append(tuple(replay(tf.constant(data)).shape) == (224, 224, 3))
        except tf.errors.InvalidArgumentError:
            read.append(False)
    assert kept == all(read) == (min(width, height) >= encoding.min_side)
