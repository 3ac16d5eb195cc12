"""check_image against real TensorFlow 2.21 decodes: every row of the table in
transforms/image_check.py, each kind of broken input, truncation and bit-flip sweeps, and bombs."""

from __future__ import annotations

import io
import pathlib
import random
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageFile

from tests import broken_images as bi
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from transforms.image_check import BadImage, Encoding, check_image

MAX_PIXELS = 10_000_000
REPO = pathlib.Path(__file__).resolve().parents[2]


class Variant(NamedTuple):
    make: Callable[[], bytes]
    stored: str  # "as is" when the source's own bytes are stored, else the re-encoding's format: "png" or "jpeg"
    channels: int
    # How TF's decode of the stored bytes compares with Pillow's: "exact", "close" (JPEG decoders
    # round differently), or None where they differ by design (16-bit scaling, GIF transparency,
    # a 32-bit BMP's 4th byte).
    tf_vs_pillow: str | None = "exact"
    frames: int = 1  # pictures in the source (animations, pages; an MPO's second view and previews are not)


V = Variant
VARIANTS = {
    # PNG: TF decodes every kind; channels follow the IHDR colour type.
    "png 1-bit": V(lambda: bi.image_bytes("PNG", "1"), "as is", 1),
    "png L": V(lambda: bi.image_bytes("PNG", "L"), "as is", 1),
    "png LA": V(lambda: bi.image_bytes("PNG", "LA"), "as is", 2),
    "png RGB": V(lambda: bi.image_bytes("PNG", "RGB"), "as is", 3),
    "png RGBA": V(lambda: bi.image_bytes("PNG", "RGBA"), "as is", 4),
    "png palette": V(lambda: bi.image_bytes("PNG", "P"), "as is", 3),
    "png palette 4-bit": V(lambda: bi.image_bytes("PNG", "P", bits=4), "as is", 3),
    "png palette, tRNS index": V(lambda: bi.image_bytes("PNG", "P", transparency=3), "as is", 4),
    "png palette, tRNS alphas": V(
        lambda: bi.image_bytes("PNG", "P", transparency=bytes(range(0, 256, 16))), "as is", 4
    ),
    "png L, tRNS ignored": V(lambda: bi.image_bytes("PNG", "L", transparency=17), "as is", 1),
    "png RGB, tRNS ignored": V(lambda: bi.image_bytes("PNG", "RGB", transparency=(1, 2, 3)), "as is", 3),
    "png 16-bit grey": V(lambda: bi.image_bytes("PNG", "I;16"), "as is", 1, None),
    "png 16-bit grey+alpha": V(lambda: bi.crafted_png(4, 16), "as is", 2, None),  # Pillow: RGBA
    "png 16-bit RGB": V(lambda: bi.crafted_png(2, 16), "as is", 3, None),
    "png 16-bit RGBA": V(lambda: bi.crafted_png(6, 16), "as is", 4, None),
    "png interlaced": V(lambda: bi.crafted_png(2, 8, interlace=True), "as is", 3),
    "apng": V(lambda: bi.animated_bytes("PNG"), "as is", 3, frames=3),
    # JPEG: Huffman-coded DCT in any colour space; CMYK/YCCK come out as 3 channels.
    "jpeg grey": V(lambda: bi.image_bytes("JPEG", "L"), "as is", 1, "close"),
    "jpeg RGB": V(lambda: bi.image_bytes("JPEG", "RGB"), "as is", 3, "close"),
    "jpeg 4:4:4": V(lambda: bi.image_bytes("JPEG", "RGB", subsampling=0), "as is", 3, "close"),
    "jpeg progressive": V(lambda: bi.image_bytes("JPEG", "RGB", progressive=True), "as is", 3, "close"),
    "jpeg restart markers": V(lambda: bi.image_bytes("JPEG", "RGB", restart_marker_blocks=1), "as is", 3, "close"),
    "jpeg trailing bytes": V(
        lambda: bi.image_bytes("JPEG", "RGB") + b"\0" * 64 + b"\xff\xd8 maker notes", "as is", 3, "close"
    ),
    "jpeg CMYK (Adobe)": V(lambda: bi.image_bytes("JPEG", "CMYK"), "as is", 3, "close"),
    "jpeg YCCK": V(bi.ycck_jpeg, "as is", 3, "close"),
    "jpeg EXIF-rotated": V(bi.exif_oriented, "as is", 3, "close"),  # stored unrotated, like TF decodes it
    "mpo": V(bi.mpo, "as is", 3, "close"),
    "jpeg lossless": V(bi.lossless_jpeg, "png", 3),
    "jpeg arithmetic-coded (stand-in)": V(bi.jpeg_relabelled, "jpeg", 3, "close"),
    "mpo arithmetic-coded (stand-in)": V(lambda: bi.jpeg_relabelled(jpeg=bi.mpo()), "jpeg", 3, "close"),
    # GIF: frame 0 as 3 channels when TF's sizing and colour maps agree with Pillow's.
    "gif": V(lambda: bi.image_bytes("GIF", "P"), "as is", 3),
    "gif grey": V(lambda: bi.image_bytes("GIF", "L"), "as is", 3),
    "gif not interlaced": V(lambda: bi.image_bytes("GIF", "P", interlace=False), "as is", 3),
    "gif transparency": V(lambda: bi.image_bytes("GIF", "P", transparency=3), "as is", 3, None),
    "gif animated": V(lambda: bi.animated_bytes("GIF", "P"), "as is", 3, frames=3),
    "gif frame larger than canvas": V(lambda: bi.gif_with_canvas(16, 12), "as is", 3),
    "gif canvas larger than frames": V(lambda: bi.gif_with_canvas(64, 48), "png", 3),
    "gif without colour map": V(bi.gif_without_colour_map, "png", 1),
    # BMP: 24-bit, 32-bit BGRA and grey-ramp 8-bit ending exactly after the pixels.
    "bmp 24-bit": V(lambda: bi.image_bytes("BMP", "RGB"), "as is", 3),
    "bmp 24-bit top-down": V(bi.bmp_top_down, "as is", 3),
    "bmp 32-bit": V(lambda: bi.image_bytes("BMP", "RGBA"), "as is", 4, None),
    "bmp 32-bit BGRA bit fields": V(bi.bmp_bitfields, "as is", 4),
    "bmp 8-bit grey": V(lambda: bi.image_bytes("BMP", "L"), "as is", 1),
    "bmp 8-bit palette": V(lambda: bi.image_bytes("BMP", "P"), "png", 3),
    "bmp 1-bit": V(lambda: bi.image_bytes("BMP", "1"), "png", 1),
    "bmp 32-bit RGBA bit fields": V(lambda: bi.bmp_bitfields("RGBA"), "png", 4),
    "bmp 16-bit 565": V(bi.bmp_16bit, "png", 3),
    "bmp 16-bit 555": V(lambda: bi.bmp_16bit(5), "png", 3),
    "bmp RLE8": V(bi.bmp_rle8, "png", 1),
    "bmp trailing bytes": V(lambda: bi.image_bytes("BMP", "RGB") + b"\0\0", "png", 3),
    # WebP: still images as they are; animated ones would crash TF.
    "webp lossy": V(lambda: bi.image_bytes("WEBP", "RGB"), "as is", 3, "close"),
    "webp lossless": V(lambda: bi.image_bytes("WEBP", "RGB", lossless=True), "as is", 3),
    "webp alpha lossy": V(lambda: bi.image_bytes("WEBP", "RGBA"), "as is", 4, "close"),
    "webp alpha lossless": V(lambda: bi.image_bytes("WEBP", "RGBA", lossless=True), "as is", 4),
    "webp animated": V(lambda: bi.animated_bytes("WEBP"), "png", 3, frames=3),
    # Unknown to TF: PNG keeping grey, alpha, palette, 16 bits.
    "tiff RGB": V(lambda: bi.image_bytes("TIFF", "RGB"), "png", 3),
    "tiff grey": V(lambda: bi.image_bytes("TIFF", "L"), "png", 1),
    "tiff 1-bit": V(lambda: bi.image_bytes("TIFF", "1"), "png", 1),
    "tiff LA": V(lambda: bi.image_bytes("TIFF", "LA"), "png", 2),
    "tiff RGBA": V(lambda: bi.image_bytes("TIFF", "RGBA"), "png", 4),
    "tiff palette": V(lambda: bi.image_bytes("TIFF", "P"), "png", 3),
    "tiff CMYK": V(lambda: bi.image_bytes("TIFF", "CMYK"), "png", 3),
    "tiff 16-bit": V(lambda: bi.image_bytes("TIFF", "I;16"), "png", 1, None),
    "tiff 32-bit int": V(lambda: bi.image_bytes("TIFF", "I"), "png", 1, None),
    "tiff JPEG-compressed": V(lambda: bi.image_bytes("TIFF", "RGB", compression="jpeg"), "png", 3),
    "tiff multi-page": V(lambda: bi.animated_bytes("TIFF"), "png", 3, frames=3),
    "jpeg 2000": V(lambda: bi.image_bytes("JPEG2000", "RGB"), "png", 3),
    "ico": V(lambda: bi.image_bytes("ICO", "RGBA", (48, 48)), "png", 4),
    "ppm": V(lambda: bi.image_bytes("PPM", "RGB"), "png", 3),
    "pgm 16-bit": V(lambda: bi.image_bytes("PPM", "I;16"), "png", 1, None),
    "tga": V(lambda: bi.image_bytes("TGA", "RGB"), "png", 3),
    "pcx": V(lambda: bi.image_bytes("PCX", "RGB"), "png", 3),
    "qoi": V(lambda: bi.image_bytes("QOI", "RGBA"), "png", 4),
    "avif": V(lambda: bi.image_bytes("AVIF", "RGB"), "png", 3),
}


def tf_decode(data: bytes) -> np.ndarray:
    return tf.io.decode_image(data, expand_animations=False).numpy()


def pillow_pixels(data: bytes, mode: str) -> np.ndarray:
    a = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
    return a.reshape(a.shape[0], a.shape[1], -1)


@pytest.mark.parametrize("name", VARIANTS)
def test_variant(name):
    variant = VARIANTS[name]
    source = variant.make()
    header = Image.open(io.BytesIO(source))
    checked = check_image(source, MAX_PIXELS)

    decoded = tf_decode(checked.data)
    assert decoded.shape == (checked.height, checked.width, checked.channels)
    assert checked.channels == variant.channels
    assert (checked.width, checked.height) == header.size
    # Re-encoding keeps the first frame: the run reports how many the source had.
    assert checked.frames == (variant.frames if checked.converted else 1)
    if variant.stored == "as is":
        assert checked.data is source and not checked.converted
        assert checked.format == ("jpeg" if header.format == "MPO" else header.format.lower())
    elif variant.stored == "jpeg":  # quality 95 from a lossy JPEG
        assert checked.converted and checked.format == "jpeg"
        assert np.abs(pillow_pixels(checked.data, "RGB").astype(int) - pillow_pixels(source, "RGB")).mean() < 3
    else:  # PNG: lossless
        assert checked.converted and checked.format == variant.stored
        out = Image.open(io.BytesIO(checked.data))
        lossless_mode = "I" if out.mode == "I;16" else "RGBA"
        np.testing.assert_array_equal(pillow_pixels(checked.data, lossless_mode), pillow_pixels(source, lossless_mode))
    if variant.tf_vs_pillow:
        expected = pillow_pixels(checked.data, {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[checked.channels]).astype(int)
        difference = np.abs(decoded.astype(int) - expected)
        assert difference.max() == 0 if variant.tf_vs_pillow == "exact" else difference.mean() < 2


def large_int_tiff() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.arange(48 * 64, dtype=np.int32).reshape(48, 64) * 1000).save(buffer, "TIFF")
    return buffer.getvalue()


BROKEN = {
    "zero bytes": (bi.zero_bytes, "read", "empty file (0 bytes)"),
    "html page": (
        bi.html_page,
        "identify",
        "not an image: 157 bytes of HTML/XML (a web page saved under an image name?)",
    ),
    "csv text": (lambda: b"path,label\ncat.jpg,cat\n", "identify", "not an image: 23 bytes of text"),
    "utf-8 text": (lambda: "Grüße, 日本\n".encode(), "identify", "not an image: 16 bytes of text"),
    "unknown binary": (
        lambda: bytes(range(256)),
        "identify",
        "not an image: binary data of an unknown kind (256 bytes)",
    ),
    "pdf": (lambda: b"%PDF-1.7\n" + bytes(2000), "identify", "not an image: a PDF document (2,009 bytes)"),
    "zip": (lambda: b"PK\x03\x04" + bytes(100), "identify", "not an image: a ZIP archive (104 bytes)"),
    "eps": (lambda: bi.image_bytes("EPS", "RGB"), "identify", "EPS files are not accepted"),
    "truncated jpeg": (bi.truncated_jpeg, "decode", "bad JPEG data: image file is truncated"),
    "jpeg without end marker": (bi.jpeg_without_end_marker, "decode", "no end-of-image marker"),
    "corrupt jpeg": (bi.corrupt_jpeg, "decode", "bad JPEG data"),
    "jpeg with a stray marker": (bi.jpeg_with_stray_marker, "decode", "segment 0xE6 at byte"),
    "jpeg header only": (lambda: bi.image_bytes("JPEG", "RGB")[:100], "decode", "unreadable header"),
    "truncated png": (bi.truncated_png, "decode", "bad PNG data: truncated"),
    "png without IEND's CRC": (lambda: bi.image_bytes("PNG", "RGB")[:-4], "decode", "no intact IEND chunk"),
    "corrupt png": (bi.corrupt_png, "decode", "bad PNG data"),
    "png with a bad CRC": (bi.png_with_bad_crc, "decode", "bad PNG data: broken PNG file (a bad chunk checksum)"),
    "png cut inside its header": (lambda: bi.image_bytes("PNG", "RGB")[:20], "decode", "unreadable header: truncated"),
    "png zero width": (
        lambda: bi.bomb_png(0, 10),
        "decode",
        "starts like a PNG but its header is truncated or corrupt",
    ),
    "truncated gif": (lambda: bi.image_bytes("GIF", "P")[:-300], "decode", "bad GIF data: image file is truncated"),
    "truncated animated gif": (
        lambda: bi.animated_bytes("GIF", "P")[:-300],
        "decode",
        "truncated GIF: the file ends after 2 complete frame(s)",
    ),
    "truncated webp": (lambda: bi.image_bytes("WEBP", "RGB")[:-200], "decode", "unreadable header"),
    "truncated bmp": (lambda: bi.image_bytes("BMP", "RGB")[:-200], "decode", "bad BMP data: image file is truncated"),
    "bomb png": (bi.bomb_png, "dimensions", "10,000,000,000 pixels; the limit is 10,000,000"),
    "tiff with a lost page": (bi.tiff_with_a_lost_page, "decode", "bad TIFF data"),
    "tiff float": (lambda: bi.image_bytes("TIFF", "F"), "convert", "mode F has no lossless PNG form"),
    "tiff 32-bit, large values": (large_int_tiff, "convert", "outside 0..65535"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_broken_input(name):
    make, stage, reason = BROKEN[name]
    with pytest.raises(BadImage) as raised:
        check_image(make(), MAX_PIXELS)
    assert (raised.value.stage, reason.lower() in raised.value.reason.lower()) == (stage, True), raised.value.reason


@pytest.mark.parametrize(
    "name",
    [
        "truncated jpeg",
        "jpeg without end marker",
        "corrupt jpeg",
        "jpeg with a stray marker",
        "truncated png",
        "png without IEND's CRC",
        "corrupt png",
        "png with a bad CRC",
    ],
)
def test_what_is_refused_as_undecodable_is_undecodable_in_tensorflow(name):
    """Each check earns its cost: without it, these would be records TF cannot read."""
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf_decode(BROKEN[name][0]())


def test_more_pixels_than_max_pixels():
    with pytest.raises(BadImage) as raised:
        check_image(bi.image_bytes("PNG", "RGB"), 3000)
    assert (raised.value.stage, raised.value.reason) == ("dimensions", "64x48 is 3,072 pixels; the limit is 3,000")
    assert check_image(bi.image_bytes("PNG", "RGB"), 3072).width == 64


def test_pillow_bomb_warning_neither_preempts_nor_crashes():
    """100M pixels: over Pillow's warning threshold (~89M), under its error (~179M)."""
    data = bi.bomb_png(10_000, 10_000)
    with pytest.warns(Image.DecompressionBombWarning), pytest.raises(BadImage) as raised:
        check_image(data, MAX_PIXELS)
    assert raised.value.stage == "dimensions"
    assert raised.value.reason == "10000x10000 is 100,000,000 pixels; the limit is 10,000,000"
    with warnings.catch_warnings(), pytest.raises(BadImage) as raised:
        warnings.simplefilter("error")
        check_image(data, MAX_PIXELS)
    assert (raised.value.stage, raised.value.reason) == ("dimensions", "100,000,000 pixels; the limit is 10,000,000")


@pytest.mark.parametrize("max_pixels", [3000, MAX_PIXELS, Image.MAX_IMAGE_PIXELS])
def test_a_bomb_pillow_refuses_is_reported_against_the_configured_limit(max_pixels):
    """Pillow refuses this one itself (over twice its own limit) before check_image sees its size:
    the dead letter still gives the image's pixels and the configured image.max_pixels, not Pillow's."""
    with pytest.raises(BadImage) as raised:
        check_image(bi.bomb_png(), max_pixels)
    assert raised.value.stage == "dimensions"
    assert raised.value.reason == f"10,000,000,000 pixels; the limit is {max_pixels:,}"
    assert f"{2 * Image.MAX_IMAGE_PIXELS}" not in raised.value.reason


def test_max_pixels_limit_is_what_check_image_accepts():
    from transforms.image_check import max_pixels_limit

    check_image(bi.image_bytes("PNG", "RGB"), max_pixels_limit())
    with pytest.raises(ValueError, match="max_pixels"):
        check_image(bi.image_bytes("PNG", "RGB"), max_pixels_limit() + 1)


def test_max_pixels_above_what_pillow_allows_is_a_configuration_error():
    with pytest.raises(ValueError, match="max_pixels"):
        check_image(bi.image_bytes("PNG", "RGB"), Image.MAX_IMAGE_PIXELS + 1)
    check_image(bi.image_bytes("PNG", "RGB"), Image.MAX_IMAGE_PIXELS)


def test_pillow_settings_are_left_alone():
    before = Image.MAX_IMAGE_PIXELS
    for make in (bi.truncated_jpeg, bi.truncated_png, bi.bomb_png):
        with pytest.raises(BadImage):
            check_image(make(), MAX_PIXELS)
    assert Image.MAX_IMAGE_PIXELS == before and ImageFile.LOAD_TRUNCATED_IMAGES is False


def test_bombs_are_refused_from_the_header_without_tensorflow_or_a_large_allocation():
    """In a fresh interpreter whose address space may grow by only 64 MiB: a 9000x9000 RGBA PNG
    (under Pillow's own guard, so only check_image stands in the way) would need 324 MB."""
    script = textwrap.dedent("""
        import io, resource, sys
        from PIL import Image
        from tests import broken_images
        from transforms.image_check import BadImage, check_image
        huge, giant = broken_images.bomb_png(9000, 9000), broken_images.bomb_png()
        size = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + (64 << 20),) * 2)
        for data in (huge, giant):
            try:
                check_image(data, 10_000_000)
            except BadImage as e:
                print(e.stage)
        try:
            Image.open(io.BytesIO(huge)).load()
        except MemoryError:
            print("control: decoding it does not fit")
        print("tensorflow" in sys.modules)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
    )
    expected = ["dimensions", "dimensions", "control: decoding it does not fit", "False", ""]
    assert result.stdout.split("\n") == expected, result.stderr


FUZZED = [
    "jpeg RGB",
    "jpeg progressive",
    "jpeg grey",
    "mpo",
    "png RGB",
    "png palette",
    "gif animated",
    "bmp 24-bit",
    "webp lossy",
    "webp alpha lossless",
]


def damaged_copies(name: str) -> list[bytes]:
    """The source of VARIANTS[name] cut at random lengths and in its last 12 bytes, and with one bit
    flipped at random: the same copies on every run."""
    source = VARIANTS[name].make()
    rng = random.Random(name)
    damaged = [source[:n] for n in rng.sample(range(1, len(source)), min(60, len(source) - 1))]
    damaged += [source[:-k] for k in range(1, 13)]
    for _ in range(150):
        flipped = bytearray(source)
        flipped[rng.randrange(len(source))] ^= 1 << rng.randrange(8)
        damaged.append(bytes(flipped))
    return damaged


@pytest.mark.filterwarnings("ignore:Image appears to be a malformed MPO file")
@pytest.mark.parametrize("name", FUZZED)
def test_truncated_or_bit_flipped_files_are_refused_or_decode(name):
    """The guarantee under damage: BadImage, or bytes that TF decodes to the stated shape."""
    for data in damaged_copies(name):
        try:
            checked = check_image(data, MAX_PIXELS)
        except BadImage:
            continue
        assert tf_decode(checked.data).shape == (checked.height, checked.width, checked.channels)


@pytest.mark.parametrize(
    "make, min_side, kept",
    [
        (lambda: bi.image_bytes("JPEG", "RGB", (1, 1)), 2, False),
        (lambda: bi.image_bytes("PNG", "RGB", (1, 40)), 2, False),
        (lambda: bi.image_bytes("PNG", "RGB", (40, 1)), 1, True),  # the default refuses nothing
        (lambda: bi.image_bytes("GIF", "P", (2, 2)), 2, True),
        (lambda: bi.image_bytes("JPEG", "RGB", (9, 3)), 4, False),
        (lambda: bi.exif_oriented(6), 48, True),  # 64x48 turned is 48x64: the same shorter side
        (lambda: bi.exif_oriented(6), 49, False),
    ],
)
def test_min_side_refuses_a_shorter_side_naming_both_sizes_and_the_setting(make, min_side, kept):
    data = make()
    width, height = Image.open(io.BytesIO(data)).size
    for encoding in (Encoding(min_side=min_side), Encoding(jpeg_only=True, upright=True, min_side=min_side)):
        if kept:
            checked = check_image(data, MAX_PIXELS, encoding)
            assert min(checked.width, checked.height) >= min_side
            continue
        with pytest.raises(BadImage) as refused:
            check_image(data, MAX_PIXELS, encoding)
        assert refused.value.stage == "dimensions"
        side = min(width, height)
        assert refused.value.reason == (
            f"{width}x{height}: its shorter side, {side} px, is below {min_side} px, "
            "the smallest the reader's crop takes (image.min_side)"
        )


def test_min_side_below_1_is_a_configuration_error():
    with pytest.raises(ValueError, match="min_side=0 is not >= 1"):
        Encoding(min_side=0)
