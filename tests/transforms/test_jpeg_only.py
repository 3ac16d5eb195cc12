"""`image.jpeg_only`: every source but a JPEG that TensorFlow decodes becomes an RGB JPEG that
`tf.image.decode_and_crop_jpeg` (the TPU reference ResNet's decoder) reads, with transparency
composited on white or dropped, at the configured quality."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests import broken_images as bi
from tests.transforms.test_image_check import MAX_PIXELS, VARIANTS
from transforms.image_check import Encoding, check_image

JPEG_ONLY = Encoding(jpeg_only=True)


def decode_and_crop_full(data: bytes) -> np.ndarray:
    """The TPU reader's decode (resnet_preprocessing.py) with a crop window of the whole image."""
    shape = tf.image.extract_jpeg_shape(data)
    return tf.image.decode_and_crop_jpeg(data, tf.stack([0, 0, shape[0], shape[1]]), channels=3).numpy()


def has_alpha(data: bytes) -> bool:
    im = Image.open(io.BytesIO(data))
    return im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_is_a_jpeg_the_tpu_reader_decodes(name):
    variant = VARIANTS[name]
    source = variant.make()
    header = Image.open(io.BytesIO(source))
    checked = check_image(source, MAX_PIXELS, JPEG_ONLY)

    assert checked.format == "jpeg"
    assert (checked.width, checked.height) == header.size
    if variant.stored == "as is" and header.format in ("JPEG", "MPO"):
        # JPEGs TF decodes (grey ones too: the reader decodes with channels=3) keep their bytes.
        assert checked.data is source and not checked.converted
        assert checked.channels == variant.channels
    else:
        assert checked.converted and checked.channels == 3
    assert checked.frames == (variant.frames if checked.converted else 1)
    # What the writer records is what decode_image returns, and the TPU reader's decode works.
    assert tf.io.decode_image(checked.data, expand_animations=False).shape == (
        checked.height,
        checked.width,
        checked.channels,
    )
    pixels = decode_and_crop_full(checked.data)
    assert pixels.shape == (checked.height, checked.width, 3)
    if checked.converted and variant.tf_vs_pillow and not has_alpha(source):
        expected = np.asarray(header.convert("RGB"), dtype=int)
        # Quality 95 with 4:2:0 chroma on the noisy test picture; a swapped or lost channel is ~80.
        assert np.abs(pixels.astype(int) - expected).mean() < 8


# 48x16: three 16-pixel blocks (whole JPEG MCUs, so colours do not bleed between them), sampled
# at their centres: opaque red, transparent blue, half-transparent black.
BLOCKS = [((200, 30, 30), 255), ((0, 0, 255), 0), ((0, 0, 0), 128)]
EXPECTED = {
    "composite": [(200, 30, 30), (255, 255, 255), (127, 127, 127)],  # over white
    "drop": [(200, 30, 30), (0, 0, 255), (0, 0, 0)],  # the colour under the alpha
}


def rgba_png(mode: str = "RGBA") -> bytes:
    pixels = np.zeros((16, 48, 4), np.uint8)
    for i, (rgb, alpha) in enumerate(BLOCKS):
        pixels[:, 16 * i : 16 * (i + 1)] = (*rgb, alpha)
    buffer = io.BytesIO()
    image = Image.fromarray(pixels, "RGBA")
    if mode == "P":  # a palette with a tRNS chunk of per-entry alphas
        image = image.convert("P", palette=Image.Palette.ADAPTIVE, colors=3)
        alphas = {tuple(image.getpalette()[3 * i : 3 * i + 3]): i for i in range(3)}
        trns = bytearray(3)
        for rgb, alpha in BLOCKS:
            trns[alphas[rgb]] = alpha
        image.save(buffer, "PNG", transparency=bytes(trns))
    else:
        image.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("source_mode", ["RGBA", "P"])
@pytest.mark.parametrize("alpha", ["composite", "drop"])
def test_transparency_is_composited_on_white_or_dropped(alpha, source_mode):
    source = rgba_png(source_mode)
    assert has_alpha(source)
    checked = check_image(source, MAX_PIXELS, Encoding(jpeg_only=True, alpha=alpha))
    assert (checked.format, checked.channels, checked.converted) == ("jpeg", 3, True)
    pixels = decode_and_crop_full(checked.data).astype(int)
    for i, expected in enumerate(EXPECTED[alpha]):
        centre = pixels[8, 16 * i + 8]
        assert np.abs(centre - expected).max() <= 6, (i, centre, expected)


def test_without_jpeg_only_a_png_with_alpha_stays_as_it_is():
    source = rgba_png()
    checked = check_image(source, MAX_PIXELS, Encoding(alpha="drop"))
    assert (checked.format, checked.channels, checked.converted) == ("png", 4, False)
    assert checked.data is source


def test_grey_sources_become_rgb_and_grey_jpegs_stay_grey():
    grey_png = check_image(bi.image_bytes("PNG", "L"), MAX_PIXELS, JPEG_ONLY)
    assert (grey_png.format, grey_png.channels, grey_png.converted) == ("jpeg", 3, True)
    grey_jpeg = bi.image_bytes("JPEG", "L")
    kept = check_image(grey_jpeg, MAX_PIXELS, JPEG_ONLY)
    assert (kept.data, kept.channels, kept.converted) == (grey_jpeg, 1, False)
    assert decode_and_crop_full(kept.data).shape[2] == 3


def test_deep_grey_is_scaled_to_8_bits_as_tensorflow_does():
    ramp = (np.arange(48 * 64, dtype=np.uint32).reshape(48, 64) * 21).astype(np.uint16)  # 0..64491
    buffer = io.BytesIO()
    Image.fromarray(ramp).save(buffer, "PNG")  # 16-bit grey
    checked = check_image(buffer.getvalue(), MAX_PIXELS, JPEG_ONLY)
    reference = tf.io.decode_png(buffer.getvalue(), channels=3).numpy().astype(int)  # TF's own 16 -> 8 bits
    assert np.abs(decode_and_crop_full(checked.data).astype(int) - reference).mean() < 2


def test_quality_applies_to_every_jpeg_written():
    png = bi.image_bytes("PNG", "RGB", (256, 192))
    sizes = {q: len(check_image(png, MAX_PIXELS, Encoding(jpeg_only=True, jpeg_quality=q)).data) for q in (20, 95)}
    assert sizes[20] < sizes[95] * 0.7
    # A JPEG TF cannot decode is re-encoded at the configured quality too, jpeg_only or not.
    unreadable = bi.jpeg_relabelled()
    low, high = (check_image(unreadable, MAX_PIXELS, Encoding(jpeg_quality=q)) for q in (20, 95))
    assert low.converted and low.format == "jpeg" and len(low.data) < len(high.data)


@pytest.mark.parametrize("settings", [{"jpeg_quality": 0}, {"jpeg_quality": 101}, {"alpha": "blend"}])
def test_bad_encodings_are_refused(settings):
    with pytest.raises(ValueError):
        Encoding(**settings)
