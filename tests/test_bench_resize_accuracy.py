"""scripts/bench_resize_accuracy.py: its generated photos are the same every time and larger than
the bound; one invocation converts them twice with the CLI (the second version stored at the
bound, its records naming the sources' full size), trains on both and writes the page."""

import json
import sys
from pathlib import Path

import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "scripts"))

import bench_resize_accuracy  # noqa: E402  (a script module, found through the line above)

from tests.dataset_reader import read_split  # noqa: E402

BLOCK = f"<!-- table: {bench_resize_accuracy.DOCS_BLOCK} -->\n<!-- /table: {bench_resize_accuracy.DOCS_BLOCK} -->\n"


def test_a_photo_depends_only_on_the_corpus_seed_and_its_index():
    first = bench_resize_accuracy.make_photo(5, corpus_seed=7)
    assert bench_resize_accuracy.make_photo(5, corpus_seed=7) == first
    assert bench_resize_accuracy.make_photo(5, corpus_seed=8) != first
    assert bench_resize_accuracy.make_photo(6, corpus_seed=7)[1] != first[1]
    assert [bench_resize_accuracy.make_photo(i, 7)[0] for i in range(4)] == list(bench_resize_accuracy.CLASSES)


def test_every_photo_is_a_jpeg_larger_than_the_bound_on_both_sides(tmp_path):
    bench_resize_accuracy.make_corpus(str(tmp_path), count=12, corpus_seed=3, processes=2)
    files = sorted(tmp_path.glob("*/*.jpg"))
    assert len(files) == 12 and {f.parent.name for f in files} == set(bench_resize_accuracy.CLASSES)
    for file in files:
        with Image.open(file) as image:
            assert image.format == "JPEG"
            low, high = bench_resize_accuracy.LONGER_SIDE
            assert low <= max(image.size) <= high and min(image.size) > 256, (file, image.size)


def test_one_invocation_converts_both_versions_trains_on_each_and_writes_the_page(tmp_path, capsys):
    folder, page, report = tmp_path / "work", tmp_path / "performance.md", tmp_path / "report.json"
    page.write_text(f"Before.\n{BLOCK}After.\n")
    argv = ["--folder", str(folder), "--count", "16", "--seeds", "1", "--epochs", "1", "--image_size", "32"]
    argv += ["--batch_size", "4", "--shorter_side", "200", "--json", str(report), "--docs", str(page)]
    assert bench_resize_accuracy.main(argv) == 0
    out = capsys.readouterr().out
    figures = json.loads(report.read_text())
    converted = figures["converted"]
    first, second = (converted[version] for version in bench_resize_accuracy.VERSIONS)
    assert first["records"] == second["records"] and sum(first["records"].values()) == 16
    assert second["bytes"] < first["bytes"] / 2, "stored at 200 px on the shorter side, far fewer bytes"
    for version, runs in figures["runs"].items():
        assert len(runs) == 1 and all(0 <= run["val_accuracy"] <= 1 for run in runs), (version, runs)
    summary = figures["summary"]
    accuracies = {version: [run["val_accuracy"] for run in runs] for version, runs in figures["runs"].items()}
    assert summary == bench_resize_accuracy.summarise(accuracies)
    assert "| resized (`shorter_side: 200`) |" in out and "Difference of the means" in out

    sizes = {}  # each photo's own size, by file name
    for file in (folder / "photos").glob("*/*.jpg"):
        with Image.open(file) as image:
            sizes[file.name] = image.size
    for index, dataset in enumerate(("dataset0", "dataset1")):
        records = [r for split in first["records"] for r in read_split(folder / dataset, split)]
        assert len(records) == 16
        for record in records:
            width, height = sizes[Path(record["image/filename"].decode()).name]
            stored = record["image/width"], record["image/height"]
            if index == 0:
                assert stored == (width, height) and record.get("image/original/width") is None
            else:
                assert min(stored) == 200 and max(stored) == pytest.approx(
                    200 * max(width, height) / min(width, height), abs=1
                )
                assert (record["image/original/width"], record["image/original/height"]) == (width, height)

    written = page.read_text()
    assert f"`python scripts/bench_resize_accuracy.py {' '.join(argv)}`" in written
    assert written.startswith("Before.\n") and written.endswith(
        f"<!-- /table: {bench_resize_accuracy.DOCS_BLOCK} -->\nAfter.\n"
    )


def test_parity_is_a_difference_of_the_means_within_the_spread_of_the_seeds():
    close = bench_resize_accuracy.summarise({"as converted": [0.80, 0.84, 0.82], "resized": [0.83, 0.81, 0.85]})
    assert close["difference"] == pytest.approx(0.01) and close["spread"] == pytest.approx(0.04)
    assert close["parity"]
    apart = bench_resize_accuracy.summarise({"as converted": [0.80, 0.81, 0.82], "resized": [0.70, 0.71, 0.72]})
    assert apart["difference"] == pytest.approx(-0.10) and not apart["parity"]
