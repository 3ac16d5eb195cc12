"""The statistics of a dataset stored resized (config image.resize) describe the sources' full
sizes beside the stored ones: stored sizes sit at the bound whatever the sources are, so only the
full sizes show a person what the sources were, and only they let a refresh's drift checks see
the sources change."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from PIL import Image

from core.contract.manifest import read_manifest
from core.storage import read_text
from pipeline.cli import main as pipeline_main
from pipeline.config import HoldConfig
from pipeline.hold_checks import number_divergences
from pipeline.statistics_file import read_statistics
from tests.dataset_reader import read_split

BOUND = 40
SIZES = [(120, 90), (90, 120), (200, 100), (64, 48), (50, 60)]  # all above the bound
ORIGINALS = ("image/original/width", "image/original/height")


def convert(root: pathlib.Path, scale: int) -> pathlib.Path:
    """The same photos, `scale` times larger each side, stored with the shorter side at most BOUND."""
    rng = np.random.default_rng(7)
    for label in ("a", "b"):
        (root / "in" / label).mkdir(parents=True)
        for i, (width, height) in enumerate(SIZES * 2):
            pixels = rng.integers(0, 256, (height // 10 + 1, width // 10 + 1, 3), dtype=np.uint8)
            image = Image.fromarray(pixels).resize((width * scale, height * scale))
            image.save(root / "in" / label / f"{i}.jpg", quality=90)
    config = root / "resize.yaml"
    config.write_text(json.dumps({"image": {"resize": {"shorter_side": BOUND}}}))
    out = root / "out"
    assert pipeline_main(["--config", str(config), "--input", str(root / "in"), "--output", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    return convert(tmp_path_factory.mktemp("small"), 1), convert(tmp_path_factory.mktemp("large"), 2)


def _statistics(dest: pathlib.Path):
    manifest = read_manifest(str(dest), lambda path: read_text(path, inside=str(dest)))
    return manifest, read_statistics(str(dest), manifest)


def test_the_statistics_describe_the_sources_full_sizes(versions):
    dest, _ = versions
    manifest, statistics = _statistics(dest)
    for dataset in statistics.datasets:
        records = read_split(dest, dataset.name)
        features = {f.path.step[0]: f.num_stats for f in dataset.features if f.HasField("num_stats")}
        for name in (*ORIGINALS, "image/width", "image/height"):
            values = [int(r[name]) for r in records]
            assert features[name].min == min(values) and features[name].max == max(values), name
            assert features[name].mean == pytest.approx(np.mean(values)), name
        assert features["image/original/width"].max == 200 and features["image/width"].max == 80  # 200x100 -> 80x40


def test_a_refresh_sees_the_sources_grow_where_the_stored_sizes_do_not_change(versions):
    """Sources twice as large store the same sizes: only the full sizes' histograms drift, past
    hold.numeric_js, so a held refresh names them."""
    (_, before), (_, after) = (_statistics(dest) for dest in versions)
    drifts = {(d.split, d.name): d.divergence for d in number_divergences(before, after)}
    assert {split for split, _ in drifts} == {"train", "validation"}
    for split in ("train", "validation"):
        for name in ORIGINALS:
            assert drifts[(split, name)] > HoldConfig().numeric_js, (split, name)
        for name in ("image/width", "image/height", "image/aspect_ratio"):
            assert drifts[(split, name)] == pytest.approx(0, abs=1e-9), (split, name)
