"""`inspect DEST --report FILE.html` in a real headless browser (Debian's chromium): the page loads
with no console message and no request but for itself, its key figures are in the DOM, names from
the data are shown and never run (a class folder named as an HTML tag with a script), a dataset
stored resized says so and charts the sources' full sizes beside the stored ones, and a screenshot
renders."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest
from PIL import Image, ImageStat

from tests.subprocess_limits import run_pipeline

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample" / "images"
HOSTILE = "<img src=x onerror=document.title='run'>"  # a class folder's name: no "/"


def chromium(*argv: str) -> subprocess.CompletedProcess:
    browser = shutil.which("chromium")
    assert browser, "Debian's chromium is needed: apt-get install -y chromium (.ci/run installs it)"
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[pathlib.Path, dict]:
    folder = tmp_path_factory.mktemp("report")
    for label, name in (("circle", "circle"), ("square", HOSTILE)):
        shutil.copytree(SAMPLE / label, folder / "src" / name)
    (folder / "src" / "circle" / "broken.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    done = run_pipeline(["--input", str(folder / "src"), "--output", str(folder / "out")])
    assert done.returncode == 0, done.stderr
    page = folder / "report.html"
    done = run_pipeline(["inspect", str(folder / "out"), "--report", str(page)])
    assert done.returncode == 0, done.stderr
    assert f"report: {page}" in done.stdout
    return page, json.loads((folder / "out" / "manifest.json").read_text())


def test_the_page_loads_alone_with_its_figures_in_the_dom(report):
    page, manifest = report
    html = page.read_text()
    assert "<script" not in html.replace("&lt;script", "") and "http://" not in html and "https://" not in html
    done = chromium("--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert "CONSOLE" not in done.stderr, done.stderr[-2000:]
    dom = done.stdout
    assert f'<b id="records">{manifest["counts"]["written"]:,}</b>' in dom
    assert f'<b id="errors">{manifest["counts"]["errors"]:,}</b>' in dom
    for split in manifest["splits"].values():
        for label, count in split["label_counts"].items():
            assert f"{label.replace('<', '&lt;').replace('>', '&gt;')}: {count:,}" in dom
    assert "&lt;img src=x onerror=document.title='run'&gt;" in dom
    assert "<title>images dataset" in dom and '<img src="x"' not in dom  # the class name's tag never ran
    assert "broken.jpg" in dom and 'id="first-errors"' in dom
    assert 'id="stored-size"' not in dom and "<h2>Image sizes</h2>" in dom  # not resized: stored as they are


def test_a_resized_dataset_says_its_sizes_are_the_stored_ones(tmp_path):
    """image.resize: the page charts the records' stored sizes and, beside them, the sources' full
    sizes, and says which are which."""
    shutil.copytree(SAMPLE / "circle", tmp_path / "src" / "circle")
    config = tmp_path / "resize.yaml"
    config.write_text(json.dumps({"image": {"resize": {"longer_side": 40}}}))
    done = run_pipeline(["--config", str(config), "--input", str(tmp_path / "src"), "--output", str(tmp_path / "out")])
    assert done.returncode == 0, done.stderr
    page = tmp_path / "report.html"
    done = run_pipeline(["inspect", str(tmp_path / "out"), "--report", str(page)])
    assert done.returncode == 0, done.stderr
    done = chromium("--dump-dom", page.as_uri())
    assert done.returncode == 0 and "CONSOLE" not in done.stderr, done.stderr[-2000:]
    assert (
        '<div class="muted" id="stored-size">Images stored with their longer side at most 40 px (image.resize), '
        "JPEG quality 90; full sizes in image/original/height, image/original/width</div>"
    ) in done.stdout
    assert "<h2>Image sizes as stored, and the sources' full sizes</h2>" in done.stdout
    for name in ("image/width", "image/original/width", "image/original/height"):
        assert f'<h3>{name} <span class="muted">(train)</span></h3>' in done.stdout, name


def test_a_screenshot_renders_the_page(report, tmp_path):
    page, _ = report
    shot = tmp_path / "report.png"
    done = chromium(f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.size == (1280, 1600)
        assert max(ImageStat.Stat(image.convert("L")).stddev) > 20  # charts and thumbnails, not a blank page
