"""EXIF orientation, which TensorFlow's decoders ignore: reported as it is stored, or applied
(`image.exif_orientation: apply`), checked against real TensorFlow decodes."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

from tests.broken_images import exif_oriented, image_bytes
from transforms.image_check import DEFAULT_MAX_PIXELS, Encoding, check_image

UPRIGHT = Encoding(upright=True)


def decoded(data: bytes) -> np.ndarray:
    return tf.io.decode_image(data, channels=3, expand_animations=False).numpy().astype(int)


def as_a_viewer_shows(data: bytes) -> np.ndarray:
    return np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")).astype(int)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_the_orientation_tensorflow_ignores_is_reported_and_the_bytes_kept(fmt):
    data = exif_oriented(6, fmt)
    image = check_image(data, DEFAULT_MAX_PIXELS)
    assert (image.orientation, image.converted, image.data) == (6, False, data)
    assert (image.height, image.width) == (48, 64)
    # What makes it worth a warning: TensorFlow decodes the stored pixels, a viewer turns them.
    assert decoded(data).shape == (48, 64, 3) and as_a_viewer_shows(data).shape == (64, 48, 3)


def test_a_re_encoded_source_reports_the_orientation_it_does_not_apply():
    webp = check_image(exif_oriented(8, "WEBP"), DEFAULT_MAX_PIXELS, Encoding(jpeg_only=True))
    assert (webp.orientation, webp.converted, webp.format) == (8, True, "jpeg")
    assert decoded(webp.data).shape == (48, 64, 3)  # as stored, not as a viewer shows the source


def test_a_tiff_is_turned_by_pillow_itself_so_there_is_nothing_to_report():
    data = exif_oriented(8, "TIFF")
    image = check_image(data, DEFAULT_MAX_PIXELS)
    assert (image.orientation, image.converted) == (1, True)
    assert np.abs(decoded(image.data) - as_a_viewer_shows(data)).max() == 0


def test_no_exif_unknown_values_and_broken_exif_are_upright():
    assert check_image(image_bytes("JPEG", "RGB"), DEFAULT_MAX_PIXELS).orientation == 1
    assert check_image(exif_oriented(1), DEFAULT_MAX_PIXELS).orientation == 1
    assert check_image(exif_oriented(9), DEFAULT_MAX_PIXELS).orientation == 1
    data = exif_oriented(6)
    app1 = data.index(b"Exif\x00\x00") + 6
    broken = data[:app1] + b"\xde\xad" * 8 + data[app1 + 16 :]  # the TIFF header of the EXIF block
    image = check_image(broken, DEFAULT_MAX_PIXELS)
    assert (image.orientation, image.converted, image.data) == (1, False, broken)


@pytest.mark.parametrize("orientation", range(2, 9))
@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "TIFF"])
def test_applied_the_record_decodes_as_a_viewer_shows_it(orientation, fmt):
    data = exif_oriented(orientation, fmt)
    image = check_image(data, DEFAULT_MAX_PIXELS, UPRIGHT)
    assert (image.orientation, image.converted) == (1, True)
    assert image.format == ("jpeg" if fmt == "JPEG" else "png")
    want = as_a_viewer_shows(data)
    got = decoded(image.data)
    assert (image.height, image.width, image.channels) == got.shape == want.shape
    assert np.abs(got - want).mean() < (3 if fmt == "JPEG" else 0.001)  # a JPEG at q95 twice; a PNG exactly


def test_applied_an_upright_source_is_stored_as_it_is():
    data = exif_oriented(1)
    assert check_image(data, DEFAULT_MAX_PIXELS, UPRIGHT).data == data
