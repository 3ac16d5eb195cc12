"""image.jpeg_quality's default: 90 (FFCV's) where image.resize stores images scaled down, 95
otherwise, made explicit when the config loads so that the manifest records the quality used; a
quality given is kept either way."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from pipeline.config import Config, to_dict
from transforms.image_check import JPEG_QUALITY, RESIZED_JPEG_QUALITY, Encoding, default_jpeg_quality
from transforms.image_resize import Resize

_SIDE = st.integers(1, 4096)
_RESIZE = st.one_of(
    st.just(None),  # no resize key
    st.just({}),
    st.builds(lambda n: {"shorter_side": n}, _SIDE),
    st.builds(lambda n: {"longer_side": n}, _SIDE),
    st.builds(lambda n: {"shorter_side": n, "longer_side": None}, _SIDE),
    st.just({"shorter_side": None, "longer_side": None}),
)
_QUALITY = st.one_of(st.just("absent"), st.none(), st.integers(1, 100))


@settings(max_examples=300, deadline=None)
@given(resize=_RESIZE, quality=_QUALITY)
def test_the_quality_is_the_one_given_else_the_default_of_the_resize(resize, quality):
    image = {} if resize is None else {"resize": resize}
    if quality != "absent":
        image["jpeg_quality"] = quality
    config = Config.model_validate({"kind": "images", "image": image})
    scaled = bool(resize) and any(side is not None for side in resize.values())
    expected = quality if isinstance(quality, int) else (RESIZED_JPEG_QUALITY if scaled else JPEG_QUALITY)
    assert config.image.jpeg_quality == expected
    assert config.image.encoding.jpeg_quality == expected  # what the conversion encodes at
    assert to_dict(config)["image"]["jpeg_quality"] == expected  # what the manifest records


@given(shorter=st.one_of(st.none(), _SIDE), quality=st.one_of(st.none(), st.integers(1, 100)))
def test_the_transforms_encoding_resolves_the_same_default(shorter, quality):
    resize = Resize(shorter_side=shorter)
    encoding = Encoding(jpeg_quality=quality, resize=resize)
    assert encoding.jpeg_quality == (quality if quality is not None else default_jpeg_quality(resize))
    assert default_jpeg_quality(resize) == (RESIZED_JPEG_QUALITY if shorter else JPEG_QUALITY)
