"""pipeline.stored_size: the sample of sources a resized dataset's shards are sized by, and what
it measures, against the real reader and checker; then the plan's shards, both image kinds."""

from __future__ import annotations

import json
import math
import pathlib

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.image_csv_plan import uri_digest
from pipeline.stored_size import SourceSample, stored_fraction
from tests import broken_images as bi
from tests.dataset_reader import load_manifest
from transforms.image_check import DEFAULT_MAX_PIXELS, Encoding
from transforms.image_resize import Resize

PHOTOS = 40  # of 480x360, each about 60 KB
TARGET_MIB = 0.25  # so that the full-size photos take several shards


@settings(max_examples=80, deadline=None)
@given(
    uris=st.lists(st.text(min_size=1, max_size=12), max_size=60, unique=True), size=st.integers(1, 10), data=st.data()
)
def test_the_sample_is_the_smallest_hashes_whatever_the_order(uris, size, data):
    order = data.draw(st.permutations(uris))
    sample = SourceSample(size)
    for uri in order:
        sample.offer(uri)
    assert sample.uris == sorted(sorted(uris, key=lambda uri: (uri_digest(uri), uri))[:size])


def _photos(root: pathlib.Path) -> list[pathlib.Path]:
    paths = []
    for index in range(PHOTOS):
        path = root / ("a", "b")[index % 2] / f"{index:03d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bi.image_bytes("JPEG", "RGB", (480 + index, 360), quality=95))
        paths.append(path)
    return paths


def test_the_fraction_is_what_the_sources_store_and_unreadable_ones_count_for_nothing(tmp_path):
    photos = [str(path) for path in _photos(tmp_path / "in")[:6]]
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(bi.truncated_jpeg())
    resized = Encoding(resize=Resize(shorter_side=64))
    fraction = stored_fraction(photos, DEFAULT_MAX_PIXELS, resized, 1 << 30)
    also = stored_fraction([*photos, str(broken), str(tmp_path / "missing.jpg")], DEFAULT_MAX_PIXELS, resized, 1 << 30)
    assert fraction == also and 0 < fraction < 0.2
    assert stored_fraction(photos, DEFAULT_MAX_PIXELS, Encoding(), 1 << 30) == 1.0  # stored byte for byte
    assert stored_fraction([str(broken)], DEFAULT_MAX_PIXELS, resized, 1 << 30) is None


def _shards(tmp_path: pathlib.Path, name: str, kind: str, source: pathlib.Path, resize: dict) -> dict[str, int]:
    config = tmp_path / f"{name}.yaml"
    config.write_text(json.dumps({"kind": kind, "image": {"resize": resize}, "splits": {"train": 1.0}}))
    dest = tmp_path / name
    argv = ["--config", str(config), "--input", str(source), "--output", str(dest)]
    argv += ["--target_shard_mib", str(TARGET_MIB)]
    assert main(argv) == 0
    manifest = load_manifest(dest)
    return {"shards": len(manifest.splits["train"].shards), "bytes": manifest.splits["train"].bytes}


def test_a_resized_dataset_has_shards_sized_for_what_it_stores(tmp_path):
    """Both image kinds: the full-size photos take several shards of about the target; stored at 64
    px they hold a tenth of the bytes, in shards sized for that, not for the sources."""
    paths = _photos(tmp_path / "in")
    table = tmp_path / "labels.csv"
    table.write_text("image_uri,label\n" + "".join(f"{path},{path.parent.name}\n" for path in paths))
    for kind, source in (("images", tmp_path / "in"), ("image_csv", table)):
        full = _shards(tmp_path, f"{kind}-full", kind, source, {})
        resized = _shards(tmp_path, f"{kind}-resized", kind, source, {"shorter_side": 64})
        assert full["shards"] >= 5 and full["bytes"] / full["shards"] < 2 * TARGET_MIB * (1 << 20), (kind, full)
        assert resized["bytes"] < full["bytes"] / 10, (kind, resized)
        # Sized from the sources' bytes they would be as many as the full size's, a tenth as full.
        assert resized["shards"] <= max(1, math.ceil(2 * resized["bytes"] / (TARGET_MIB * (1 << 20)))), (kind, resized)
