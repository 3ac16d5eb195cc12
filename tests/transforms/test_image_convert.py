"""Reading a source: files longer than the run's limit are dead letters, never read, from a local
folder as from GCS (the emulator over HTTP)."""

import pathlib

import pytest

from core.contract.features import DEFAULT_IMAGE_KEYS
from transforms.example_proto import MAX_EXAMPLE_BYTES, image_features, size_bound
from transforms.image_check import CheckedImage
from transforms.image_convert import MAX_FILE_MIB, ImageConverter, ImageSettings, SourceTooLarge, read_source
from transforms.outcomes import DeadLetter, Record, Source

SAMPLE = pathlib.Path(__file__).resolve().parents[2] / "sample"
PHOTO = (SAMPLE / "images/circle/0001.jpg").read_bytes()


@pytest.fixture(params=["local", "gcs"])
def store(request, tmp_path):
    """Writes bytes under a name and returns the URI a run reads them from."""
    if request.param == "local":

        def put(name, data):
            (tmp_path / name).write_bytes(data)
            return str(tmp_path / name)

        return put
    emulator, bucket = request.getfixturevalue("gcs_emulator"), request.getfixturevalue("gcs_bucket")
    return lambda name, data: emulator.upload_bytes(f"gs://{bucket}/{name}", data)


def test_a_file_of_the_limit_is_read_and_one_byte_more_is_not(store):
    uri = store("photo.jpg", PHOTO)
    assert read_source(uri, len(PHOTO)) == PHOTO
    with pytest.raises(SourceTooLarge, match=f"^{len(PHOTO):,} bytes; the limit is {len(PHOTO) - 1:,} "):
        read_source(uri, len(PHOTO) - 1)


def test_a_source_too_large_is_a_read_dead_letter_naming_both_sizes(store):
    padded = store("padded.jpg", PHOTO + bytes(1 << 20))  # a JPEG decoders accept: data after its end
    settings = ImageSettings(("circle",), dict(DEFAULT_IMAGE_KEYS), 1_000_000, max_file_bytes=1 << 20)
    converter = ImageConverter(settings)
    outcome, read = converter.convert(Source(padded, "padded.jpg", "circle", "train"))
    size = len(PHOTO) + (1 << 20)
    assert outcome == DeadLetter(
        padded, "read", f"too large: {size:,} bytes; the limit is 1,048,576 (image.max_file_mib)"
    )
    assert read == 0
    photo = store("photo.jpg", PHOTO)
    assert isinstance(converter.convert(Source(photo, "photo.jpg", "circle", "train"))[0], Record)


def test_a_source_of_the_largest_limit_makes_an_example_tensorflow_parses():
    """Stored byte for byte, with a label and a path far longer than file systems allow."""
    largest = CheckedImage(bytes(MAX_FILE_MIB << 20), "jpeg", 1, 1, 3, False)
    features = image_features(DEFAULT_IMAGE_KEYS, largest, 2**63 - 1, "l" * 4096, "gs://" + "p" * 65536, "k" * 65536)
    assert size_bound(features) <= MAX_EXAMPLE_BYTES
    ImageSettings(("a",), dict(DEFAULT_IMAGE_KEYS), 1, max_file_bytes=MAX_FILE_MIB << 20)
    with pytest.raises(ValueError, match="max_file_bytes"):
        ImageSettings(("a",), dict(DEFAULT_IMAGE_KEYS), 1, max_file_bytes=(MAX_FILE_MIB << 20) + 1)
