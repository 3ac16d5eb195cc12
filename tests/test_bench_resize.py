"""scripts/bench_resize.py converts each corpus with and without image.resize side by side and
prints the speed and the bytes of both ways; the outputs it keeps feed scripts/benchmark_input.py
--seeds_data, which sets the trainer's reader on the resized records against the seeds' reader on
the full-size ones."""

import json
import sys
from pathlib import Path

import pytest

from tests.broken_images import image_bytes

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "scripts"))

import bench_resize  # noqa: E402  (script modules, found through the line above)
import bench_resize_stages  # noqa: E402

PHOTOS = 40  # of 480x360: each larger than the bound on both sides
RESIZED_BLOCK = "training-input-resized-40"


def _blocks(*names: str) -> str:
    return "".join(f"<!-- table: {name} -->\n<!-- /table: {name} -->\n" for name in names)


@pytest.fixture
def photos(tmp_path):
    folder = tmp_path / "photos"
    for index in range(PHOTOS):
        label = folder / ("a", "b")[index % 2]
        label.mkdir(parents=True, exist_ok=True)
        (label / f"{index:03d}.jpg").write_bytes(image_bytes("JPEG", "RGB", (480 + index, 360), quality=95))
    return folder


def test_both_ways_are_converted_measured_kept_and_written_into_the_page(tmp_path, photos, capsys):
    page, report, keep = tmp_path / "performance.md", tmp_path / "report.json", tmp_path / "kept"
    page.write_text(f"Before.\n{_blocks(bench_resize.DOCS_BLOCK)}After.\n")
    argv = ["--corpus", str(photos), "--shorter_side", "64", "--runs", "1", "--keep", str(keep)]
    argv += ["--json", str(report), "--docs", str(page)]
    assert bench_resize.main(argv) == 0

    out = capsys.readouterr().out
    (row,) = json.loads(report.read_text())["inputs"]
    assert row["input"] == f"{PHOTOS} photos" and row["check"] == "ok", row
    assert set(row["runs"]) == {"resized", "full"}
    assert row["speed_ratio"] == pytest.approx(row["resized_images_per_s"] / row["full_images_per_s"])
    assert row["resized_bytes"] < row["full_bytes"] / 4, "64 px on the shorter side of 360"
    assert row["bytes_ratio"] == pytest.approx(row["full_bytes"] / row["resized_bytes"])
    assert f"| {PHOTOS} photos | {row['resized_images_per_s']:.0f} | {row['full_images_per_s']:.0f} |" in out
    assert f"| {row['bytes_ratio']:.1f}x | ok |" in out
    written = page.read_text()
    assert f"`python scripts/bench_resize.py {' '.join(argv)}`" in written and f"| {PHOTOS} photos |" in written
    assert written.startswith("Before.\n") and written.endswith(f"<!-- /table: {bench_resize.DOCS_BLOCK} -->\nAfter.\n")
    assert sorted(path.name for path in keep.iterdir()) == ["photos-full", "photos-resized"]
    stages = row["stages"]
    assert all(stages[stage] > 0 for stage in bench_resize_stages.STAGES), stages  # every photo is scaled
    assert 0 < stages["unavoidable"] < stages["decode to scale"] + stages["JPEG encode"], stages
    assert row["reachable"] == pytest.approx(row["full_cpu_ms"] / (row["full_cpu_ms"] + stages["unavoidable"]))
    assert 0 < row["reachable"] < 1
    assert f"| {row['reachable']:.2f}x | {row['speed_ratio']:.2f}x | ok |" in out and "reachable" in written


def test_stages_time_what_a_photo_goes_through():
    """Above the bound: every stage; within it: only the check decode; not a JPEG: not timed."""
    resize = bench_resize_stages.Resize(shorter_side=64)
    above = bench_resize_stages.photo_stages(image_bytes("JPEG", "RGB", (480, 360), quality=95), resize, 95)
    assert set(above) == set(bench_resize_stages.STAGES) and min(above.values()) > 0, above
    within = bench_resize_stages.photo_stages(image_bytes("JPEG", "RGB", (60, 40), quality=95), resize, 95)
    assert within["check decode"] > 0 and not any(within[stage] for stage in bench_resize_stages.STAGES[1:]), within
    assert bench_resize_stages.photo_stages(image_bytes("PNG", "RGB", (480, 360)), resize, 95) is None
    added = above["decode to scale"] - above["check decode"] + above["JPEG encode"]
    assert bench_resize_stages._unavoidable(above) == added and bench_resize_stages._unavoidable(within) == 0


def test_the_resize_config_is_yaml_the_pipeline_reads(tmp_path):
    from pipeline.config import load_config  # noqa: PLC0415  (the project, only where it is needed)

    path = tmp_path / "resize.yaml"
    path.write_text(bench_resize.resize_config(256))
    config = load_config(str(path))
    assert config.image.resize.shorter_side == 256 and not config.image.resize.longer_side


def test_the_trainer_reads_the_resized_records_and_the_seeds_reader_the_full_size_ones(tmp_path, photos, capsys):
    keep = tmp_path / "kept"
    assert (
        bench_resize.main(["--corpus", str(photos), "--shorter_side", "128", "--runs", "1", "--keep", str(keep)]) == 0
    )
    import benchmark_input  # noqa: PLC0415  (imports TensorFlow: only this test pays for it)

    page, report = tmp_path / "performance.md", tmp_path / "input.json"
    page.write_text(_blocks(RESIZED_BLOCK))
    argv = ["--data", str(keep / "photos-resized"), "--seeds_data", str(keep / "photos-full"), "--runs", "3"]
    argv += ["--batch_size", "8", "--image_size", "32", "--json", str(report), "--docs", str(page)]
    assert benchmark_input.main(argv) == 0

    figures = json.loads(report.read_text())
    assert figures["goal"] == 4.0 and figures["records"] == PHOTOS
    assert figures["megabytes"] < figures["seeds_megabytes"] / 2
    out = capsys.readouterr().out
    assert "target >= 4x" in out
    written = page.read_text()
    assert "stored at training size for the trainer" in written and "at full size for the seeds' reader" in written
    medians = "Speed-up of the trainer's reader over the seeds' reader's 1st epoch, medians: training "
    speedup = figures["speedup"]
    assert f"{medians}{speedup['steady']:.2f}x in its steady state ({speedup['cold']:.2f}x in its 1st epoch" in written
    judged = [name for name, key in (("training", "steady"), ("evaluation", "evaluation")) if speedup[key] < 4]
    assert (f"under the goal of 4x: {', '.join(judged)}." if judged else "both at least the goal of 4x.") in written
    alone, rest = figures["bound"]["training_decode_alone"], figures["bound"]["after_decode_cpu_ms"]
    window = figures["medians"]["trainer's decode alone, 2nd epoch: random window at full scale, no resize"]
    steady = figures["medians"]["trainer input_fn: 2nd epoch (steady state)"]
    assert rest == steady[1] - window[1] and window[0] > 0
    assert f"(the random window at full scale, no resize), in its steady state, reaches {alone:.2f}x" in written
    assert f"the other {rest:.2f} ms of CPU per image" in out
