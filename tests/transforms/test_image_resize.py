"""image.resize against the real thing: every kind of source check_image takes, scaled down and
decoded by TensorFlow 2.21; sizes, turning and limits over generated cases; every broken source
still refused."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from tests import broken_images as bi
from tests.code_scan import LIBRARY, calls
from tests.transforms.test_image_check import BROKEN, FUZZED, MAX_PIXELS, VARIANTS, damaged_copies, tf_decode
from transforms.image_check import BadImage, Encoding, check_image
from transforms.image_resize import Resize

SIDES = st.integers(1, 20_000)


def bounds() -> st.SearchStrategy[Resize]:
    side = st.integers(1, 5_000)
    return st.one_of(side.map(lambda n: Resize(shorter_side=n)), side.map(lambda n: Resize(longer_side=n)))


@given(SIDES, SIDES, bounds())
@example(1000, 1, Resize(shorter_side=1))
@example(1, 1000, Resize(longer_side=1))  # the other side rounds to 0: kept at 1 px
def test_the_target_bounds_one_side_exactly_keeps_the_aspect_and_never_enlarges(width, height, resize):
    bound = resize.shorter_side or resize.longer_side
    side = min(width, height) if resize.shorter_side else max(width, height)
    target = resize.target(width, height)
    if side <= bound:
        assert target is None
        return
    stored_width, stored_height = target
    assert (min if resize.shorter_side else max)(stored_width, stored_height) == bound
    assert 1 <= stored_width <= width and 1 <= stored_height <= height
    scale = bound / side
    assert abs(stored_width - width * scale) <= 0.5 or stored_width == 1
    assert abs(stored_height - height * scale) <= 0.5 or stored_height == 1
    assert resize.target(height, width) == (stored_height, stored_width)  # a quarter turn turns it


def test_no_bound_and_two_bounds():
    assert Resize().target(10_000, 10_000) is None and not Resize().enabled
    with pytest.raises(ValueError, match="not both"):
        Resize(shorter_side=1, longer_side=2)
    with pytest.raises(ValueError, match="shorter_side=0 is not >= 1"):
        Resize(shorter_side=0)
    with pytest.raises(ValueError, match="every larger source with a side below min_side"):
        Encoding(min_side=224, resize=Resize(shorter_side=200))


@pytest.mark.filterwarnings("ignore:Image appears to be a malformed MPO file")
@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("side", ["shorter_side", "longer_side"])
def test_every_kind_of_source_larger_than_the_bound_is_stored_as_a_jpeg_tensorflow_decodes(name, side):
    variant = VARIANTS[name]
    source = variant.make()
    full = check_image(source, MAX_PIXELS)  # its size as stored without the setting: turned where that is upright
    resize = Resize(**{side: max(1, (min if side == "shorter_side" else max)(full.width, full.height) * 2 // 5)})
    checked = check_image(source, MAX_PIXELS, Encoding(resize=resize))
    upright = ImageOps.exif_transpose(Image.open(io.BytesIO(source))).size
    assert (checked.original_width, checked.original_height) == upright
    assert (checked.width, checked.height) == resize.target(*upright)
    assert (checked.format, checked.converted, checked.frames) == ("jpeg", True, variant.frames)
    assert checked.channels in (1, 3)
    assert tf_decode(checked.data).shape == (checked.height, checked.width, checked.channels)


@pytest.mark.parametrize("name", ["jpeg RGB", "png RGBA", "gif animated", "webp lossy", "tiff 16-bit", "bmp 24-bit"])
def test_a_source_within_the_bound_is_stored_as_it_would_be_without_it(name):
    source = VARIANTS[name].make()
    for resize in (Resize(shorter_side=48), Resize(longer_side=64), Resize(shorter_side=5000)):
        assert check_image(source, MAX_PIXELS, Encoding(resize=resize)) == check_image(source, MAX_PIXELS)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_before_scaling(orientation):
    """Turned as a viewer shows it, whatever exif_orientation says for sources kept whole; the
    original size is the turned full size, so stored / original is the scale on both axes."""
    source = bi.exif_oriented(orientation)
    upright = ImageOps.exif_transpose(Image.open(io.BytesIO(source)))
    for encoding in (Encoding(resize=Resize(shorter_side=24)), Encoding(upright=True, resize=Resize(shorter_side=24))):
        checked = check_image(source, MAX_PIXELS, encoding)
        assert (checked.original_width, checked.original_height) == upright.size
        assert (checked.width, checked.height) == Resize(shorter_side=24).target(*upright.size)
        assert checked.orientation == 1  # applied
        expected = np.asarray(upright.convert("RGB").resize((checked.width, checked.height), Image.Resampling.BOX))
        assert np.abs(tf_decode(checked.data).astype(int) - expected).mean() < 6


def test_a_large_jpeg_decoded_at_a_reduced_scale_matches_a_full_decode_scaled_down():
    """The DCT-scaled decode the scaling starts from keeps the picture: compared with the full
    decode scaled down by area averaging, by PSNR."""
    source = bi.image_bytes("JPEG", "RGB", (2400, 1800), quality=92)
    checked = check_image(source, MAX_PIXELS, Encoding(resize=Resize(shorter_side=256)))
    assert (checked.width, checked.height, checked.original_width) == (341, 256, 2400)
    reference = np.asarray(
        Image.open(io.BytesIO(source)).convert("RGB").resize((341, 256), Image.Resampling.BOX), dtype=np.float64
    )
    error = np.mean((tf_decode(checked.data).astype(np.float64) - reference) ** 2)
    assert 10 * np.log10(255**2 / error) > 35


@pytest.mark.parametrize("name", BROKEN)
def test_every_broken_source_is_still_refused_for_the_same_reason(name):
    """Resized, kept within the bound, or made a JPEG (jpeg_only): pixels 8 bits cannot hold
    (floating point, 32-bit values past 16 bits) are refused, never clipped into a JPEG."""
    make, stage, reason = BROKEN[name]
    data = make()
    for encoding in (
        Encoding(resize=Resize(shorter_side=8)),
        Encoding(resize=Resize(longer_side=5000)),
        Encoding(jpeg_only=True),
    ):
        with pytest.raises(BadImage) as raised:
            check_image(data, MAX_PIXELS, encoding)
        assert (raised.value.stage, reason.lower() in raised.value.reason.lower()) == (stage, True), raised.value.reason


@pytest.mark.filterwarnings("ignore:Image appears to be a malformed MPO file")
@pytest.mark.parametrize("name", FUZZED)
def test_truncated_or_bit_flipped_sources_are_refused_or_stored_as_tensorflow_decodes_them(name):
    for data in damaged_copies(name):
        try:
            plain = check_image(data, MAX_PIXELS)
        except BadImage:
            plain = None
        try:
            checked = check_image(data, MAX_PIXELS, Encoding(resize=Resize(shorter_side=16)))
        except BadImage:
            assert plain is None  # never refused when it would be a record without the setting
            continue
        assert plain is not None  # never a record when it would be a dead letter without it
        assert tf_decode(checked.data).shape == (checked.height, checked.width, checked.channels)


def test_the_limits_judge_the_original():
    with pytest.raises(BadImage) as raised:  # max_pixels: the original's pixels, not the stored ones
        check_image(bi.image_bytes("PNG", "RGB"), 3000, Encoding(resize=Resize(longer_side=10)))
    assert (raised.value.stage, raised.value.reason) == ("dimensions", "64x48 is 3,072 pixels; the limit is 3,000")
    with pytest.raises(BadImage) as raised:  # refused from the header: nothing is decoded
        check_image(bi.bomb_png(), MAX_PIXELS, Encoding(resize=Resize(shorter_side=16)))
    assert raised.value.stage == "dimensions"


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 300), st.integers(2, 300), st.integers(1, 300), st.integers(1, 120))
def test_min_side_judges_the_stored_size(width, height, longer_side, min_side):
    resize = Resize(longer_side=max(longer_side, min_side))
    data = bi.image_bytes("PNG", "RGB", (width, height))
    stored = resize.target(width, height) or (width, height)
    encoding = Encoding(min_side=min_side, resize=resize)
    if min(stored) >= min_side:
        checked = check_image(data, MAX_PIXELS, encoding)
        assert (checked.width, checked.height) == stored
        return
    with pytest.raises(BadImage) as refused:
        check_image(data, MAX_PIXELS, encoding)
    at = f" stored at {stored[0]}x{stored[1]} (image.resize)" if stored != (width, height) else ""
    assert refused.value.reason == (
        f"{width}x{height}{at}: its shorter side, {min(stored)} px, is below {min_side} px, "
        "the smallest the reader's crop takes (image.min_side)"
    )


def test_jpeg_quality_is_that_of_the_scaled_image():
    source = bi.image_bytes("JPEG", "RGB", (640, 480), quality=95)
    sizes = [
        len(check_image(source, MAX_PIXELS, Encoding(jpeg_quality=q, resize=Resize(shorter_side=240))).data)
        for q in (50, 95)
    ]
    assert sizes[0] < sizes[1]


# Pillow's calls that change an image's size or turn it, by the name's last part.
SIZE_CHANGES = frozenset({"resize", "thumbnail", "draft", "reduce", "fit", "contain", "cover", "pad", "scale"})
SIZE_CHANGES |= {"exif_transpose", "transpose", "rotate"}
# (module, function): why it may change an image's size or turn it.
ALLOWED = {
    ("transforms.image_resize", "scaled"): "the chokepoint: every stored image scaled down",
    ("transforms.image_check", "_jpeg"): "the DCT scale a JPEG is decoded at, for the check or for scaled()",
    ("transforms.image_check", "_reencode"): "turned as its EXIF orientation says, before scaled()",
    ("pipeline.contact_sheet", "contact_sheet"): "a tile of the contact sheet, drawn from a stored record",
    ("pipeline.html_report", "_thumbnail"): "a thumbnail in the report, drawn from a stored record",
}


def test_every_stored_image_is_scaled_at_one_chokepoint():
    """Nothing a run executes scales or turns an image but image_resize.scaled and the decode and
    turn before it; the contact sheet and report only draw what records hold."""
    found = {(c.module, c.function): c for c in calls(LIBRARY) if c.name.split(".")[-1] in SIZE_CHANGES}
    bypasses = sorted(c.site for key, c in found.items() if key not in ALLOWED)
    assert not bypasses, "images scaled or turned outside the chokepoint:\n" + "\n".join(bypasses)
    assert not sorted(key for key in ALLOWED if key not in found), "allowed, but they change no size"
