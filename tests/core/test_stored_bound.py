"""The bound a dataset's images were stored within has one reader, Manifest.stored_bound: it reads
options.image.resize as the config's own parser (pipeline.config.ResizeConfig) reads the setting,
for any value a manifest may hold, and no other module reads the setting from a manifest (a scan
of the code), so that inspect, --verify, the report and the trainer cannot disagree on it."""

from __future__ import annotations

import ast

import pydantic
from hypothesis import given, settings
from hypothesis import strategies as st

from core.contract.manifest import RESIZE_SIDES, Counts, Manifest
from pipeline.config import ResizeConfig
from tests.code_scan import LIBRARY, places
from transforms.image_check import max_pixels_limit

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 5000), st.floats(0, 600), st.text(max_size=4), st.just([256])
)
RESIZE = st.one_of(
    VALUES,
    st.dictionaries(st.sampled_from([*RESIZE_SIDES, "side", "Shorter_side"]), VALUES, max_size=3),
)


def _manifest(kind: str = "images", **values) -> Manifest:
    return Manifest(kind=kind, splits={}, features={}, counts=Counts(0, 0, 0, 0, 0), **values)


def _with(resize, kind: str = "images") -> Manifest:
    return _manifest(kind, options={"image": {"resize": resize, "jpeg_quality": 95}})


def _config_reads(resize):
    """The bound the config parser makes of `resize`, as a (side, pixels) pair, or None."""
    try:
        bound = ResizeConfig.model_validate(resize).bound
    except pydantic.ValidationError:
        return None
    if not bound.enabled:
        return None
    return (
        ("shorter_side", bound.shorter_side) if bound.shorter_side is not None else ("longer_side", bound.longer_side)
    )


@settings(max_examples=400, deadline=None)
@given(resize=RESIZE)
def test_the_manifest_reads_the_setting_as_the_config_does(resize):
    assert _with(resize).stored_bound == _config_reads(resize), resize


@settings(max_examples=50, deadline=None)
@given(side=st.sampled_from(RESIZE_SIDES), pixels=st.integers(1, max_pixels_limit()))
def test_a_setting_the_config_takes_is_the_manifest_s_bound_and_only_for_images(side, pixels):
    assert _with({side: pixels}).stored_bound == (side, pixels)
    assert _with({side: pixels}, kind="image_csv").stored_bound == (side, pixels)
    assert _with({side: pixels}, kind="csv").stored_bound is None
    assert _manifest().stored_bound is None  # a manifest older than the setting


def test_no_other_module_reads_the_setting_from_a_manifest():
    """A "resize" key read out of a dict (`x["resize"]`, `x.get("resize")`) anywhere in the
    product's code but Manifest.stored_bound bypasses it. pipeline.config is left out: it parses
    the setting as given (ResizeConfig, which stored_bound agrees with above), not a manifest."""
    readers = []
    for place in places((*LIBRARY, "trainer")):
        if place.module == "pipeline.config":
            continue
        node = place.node
        key = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if node.args else None
        if isinstance(key, ast.Constant) and key.value == "resize":
            readers.append(f"{place.module}:{place.function}")
    assert readers == ["core.contract.manifest:Manifest.stored_bound"], readers
