"""End to end on the DirectRunner: image folders and image CSVs -> TFRecords, read back with
TensorFlow and checked record by record against their sources."""

from __future__ import annotations

import io
import itertools
import json
import os
import pathlib
import shutil
import unicodedata
import zlib

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from pipeline.cli import main
from pipeline.commands import convert
from pipeline.config import load_config
from pipeline.folder_store import FolderPublication
from pipeline.job import RunFailedError, run_job
from pipeline.lease import Lease
from pipeline.planning import make_plan
from tests import broken_images
from tests.dataset_reader import load_manifest, load_rejected, read_dead_letters, read_split
from tests.subprocess_limits import run_pipeline
from transforms import listing_handover
from transforms.gzip_pieces import HEADER
from transforms.same_content import content_digest
from transforms.splits import assign_split

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample"
FRACTIONS = (("train", 0.8), ("validation", 0.2))

# Files that must become dead letters, with the stage that rejects them.
BROKEN = {
    "circle/truncated.jpg": ("decode", broken_images.truncated_jpeg),
    "square/truncated.png": ("decode", broken_images.truncated_png),
    "square/empty.jpg": ("read", broken_images.zero_bytes),
    "triangle/error_page.jpg": ("identify", broken_images.html_page),
    "circle/bomb.png": ("dimensions", broken_images.bomb_png),
    "stray.jpg": ("label", lambda: (SAMPLE / "images/circle/0001.jpg").read_bytes()),
    # A good JPEG padded past the runs' image.max_file_mib (1), which decoders would accept.
    "triangle/padded.jpg": ("read", lambda: (SAMPLE / "images/triangle/0001.jpg").read_bytes() + bytes(1 << 20)),
}
# Readable by Pillow but not (correctly) by TensorFlow's decoders: re-encoded and counted as converted.
CONVERTED = {
    "triangle/palette.bmp": lambda: broken_images.image_bytes("BMP", "P", (40, 30)),
    "square/scan.tiff": lambda: broken_images.image_bytes("TIFF", "RGB", (33, 21)),
    "circle/pages.tiff": lambda: broken_images.animated_bytes("TIFF", frames=4),  # its record: the first page
}
# Unusual but decoded natively by TensorFlow 2.21 (measured): stored byte for byte.
PASSED_THROUGH = {
    "triangle/cmyk.jpg": lambda: broken_images.image_bytes("JPEG", "CMYK", (40, 30)),
    "circle/grey.png": lambda: broken_images.image_bytes("PNG", "L", (20, 10)),
}
SKIPPED = ["README.txt", "square/notes.txt"]
# Hidden files and everything in hidden folders: skipped as "(hidden)", never a class, record or dead letter.
APPLE_DOUBLE = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        "  # a macOS resource fork's header
HIDDEN = {
    "circle/.DS_Store": lambda: b"Bud1",
    ".ipynb_checkpoints/0001-checkpoint.jpg": lambda: (SAMPLE / "images/circle/0001.jpg").read_bytes(),
    "square/.thumbnails/0001.jpg": lambda: (SAMPLE / "images/square/0001.jpg").read_bytes(),
    "triangle/._0001.jpg": lambda: APPLE_DOUBLE,
    "__MACOSX/triangle/._0001.jpg": lambda: APPLE_DOUBLE,
}


def all_records(folder):
    manifest = load_manifest(folder)
    return {split: read_split(folder, split) for split in manifest.splits}


@pytest.fixture(scope="module")
def messy_folder(tmp_path_factory):
    """15 sample images per class plus every kind of awkward file a real bucket holds."""
    root = tmp_path_factory.mktemp("photos")
    for label_dir in sorted((SAMPLE / "images").iterdir()):
        (root / label_dir.name).mkdir()
        for path in sorted(label_dir.iterdir())[:15]:
            shutil.copy(path, root / label_dir.name / path.name)
    shutil.copy(SAMPLE / "images/circle/0001.jpg", root / "circle/UPPER_CASE.JPG")
    for name, make in {**{k: v for k, (_, v) in BROKEN.items()}, **CONVERTED, **PASSED_THROUGH}.items():
        (root / name).write_bytes(make())
    for name in SKIPPED:
        (root / name).write_bytes(b"not an image")
    for name, make in HIDDEN.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(make())
    return root


@pytest.fixture(scope="module", params=["lean", "lean_threads", "lean_write_to_tfrecord", "parallel"])
def converted(messy_folder, tmp_path_factory, request):
    """The messy folder converted by each local runner the CLI offers: the default lean
    single-threaded one, with its images converted in two converting processes (as from 3 cores
    on, one per core) or on its threads (as on fewer cores), writing records into their shards as it makes them or
    (as every other runner) through WriteToTFRecord, and the parallel one (the FnApiRunner with two
    in-process workers)."""
    out = tmp_path_factory.mktemp("out") / "dataset"
    config = tmp_path_factory.mktemp("config") / "config.yaml"
    processes = 0 if request.param == "lean_threads" else 2
    while_reading = "false" if request.param == "lean_write_to_tfrecord" else "true"
    config.write_text(
        f"image: {{local_processes: {processes}, local_write_while_reading: {while_reading}, max_file_mib: 1}}\n"
    )
    runner = ["--direct_num_workers", "2"] if request.param == "parallel" else []
    args = ["--input", str(messy_folder), "--output", str(out), "--max_error_fraction", "0.5", "--config", str(config)]
    assert main([*args, *runner]) == 0
    return out


def test_every_source_is_a_record_a_skip_or_a_dead_letter(messy_folder, converted):
    files = [p for p in messy_folder.rglob("*") if p.is_file()]
    manifest = load_manifest(converted)
    records = [r for split in all_records(converted).values() for r in split]
    filenames = sorted(r["image/filename"].decode() for r in records)
    good = sorted(str(p) for p in files if p.relative_to(messy_folder).as_posix() not in {*BROKEN, *SKIPPED, *HIDDEN})

    assert filenames == good  # each good file exactly once
    letters = {pathlib.Path(d["source"]).relative_to(messy_folder).as_posix(): d for d in read_dead_letters(converted)}
    assert {name: d["stage"] for name, d in letters.items()} == {name: stage for name, (stage, _) in BROKEN.items()}
    assert all(d["reason"] for d in letters.values())
    assert manifest.counts.listed == len(files)
    assert (manifest.counts.written, manifest.counts.skipped, manifest.counts.errors) == (
        len(good),
        len(SKIPPED) + len(HIDDEN),
        len(BROKEN),
    )
    assert manifest.skipped_by_extension == {"(hidden)": len(HIDDEN), ".txt": len(SKIPPED)}
    assert manifest.counts.converted == len(CONVERTED)
    assert manifest.counts.reconciles()
    frames_warning, copies_warning = manifest.warnings
    assert frames_warning.startswith("1 source(s) have more than one frame or page") and frames_warning.endswith(
        f"(for example {messy_folder / 'circle/pages.tiff'}: 4 frames)"
    )
    assert copies_warning.startswith("1 image(s) are stored ")  # circle/UPPER_CASE.JPG: a copy of circle/0001.jpg
    assert f"for example {messy_folder / 'circle/0001.jpg'}" in copies_warning
    assert f"and {messy_folder / 'circle/UPPER_CASE.JPG'}" in copies_warning
    assert sum(s.records for s in manifest.splits.values()) == len(good)


def test_records_match_their_sources(messy_folder, converted):
    manifest = load_manifest(converted)
    assert manifest.label_map == ("circle", "square", "triangle")
    for split, records in all_records(converted).items():
        assert sum(manifest.splits[split].label_counts.values()) == len(records)
        for record in records:
            path = pathlib.Path(record["image/filename"].decode())
            key = path.relative_to(messy_folder).as_posix()
            label = key.split("/")[0]
            assert record["image/class/text"].decode() == label
            assert record["image/class/label"] == manifest.label_map.index(label)
            assert split == assign_split(key, FRACTIONS)
            decoded = tf.io.decode_image(record["image/encoded"], expand_animations=False).numpy()
            assert decoded.shape == (record["image/height"], record["image/width"], record["image/channels"])
            source = path.read_bytes()
            if key in CONVERTED:
                expected = np.asarray(Image.open(io.BytesIO(source)).convert("RGB"))
                assert decoded.shape == expected.shape
                assert np.abs(decoded.astype(int) - expected.astype(int)).mean() < 3  # JPEG q95 / lossless PNG
            else:
                assert record["image/encoded"] == source
                assert record["image/format"].decode() == Image.open(path).format.lower()


@pytest.mark.parametrize("processes", [0, 2])
def test_photos_are_appended_where_they_are_made_and_read_back_exactly(tmp_path, processes):
    """Photos (here JPEGs of noise, which deflate would not shrink) are appended to the shards'
    parts by the thread or process that makes them (transforms.part_appender), not handed back:
    every record reads back in TensorFlow as its source's bytes, and each shard is one GZIP member."""
    rng = np.random.default_rng(1)
    for label in ("cat", "dog"):
        (tmp_path / "src" / label).mkdir(parents=True)
        for i in range(12):
            pixels = rng.integers(0, 256, (90 + i, 120, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "src" / label / f"{i:02d}.jpg", quality=90)
    config = tmp_path / "config.yaml"
    config.write_text(f"image: {{local_processes: {processes}}}\n")
    out = tmp_path / "out"
    assert (
        main(["--input", str(tmp_path / "src"), "--output", str(out), "--num_shards", "3", "--config", str(config)])
        == 0
    )

    records = [r for split in all_records(out).values() for r in split]
    assert sorted(r["image/filename"].decode() for r in records) == sorted(
        str(p) for p in (tmp_path / "src").rglob("*.jpg")
    )
    for record in records:
        assert record["image/encoded"] == pathlib.Path(record["image/filename"].decode()).read_bytes()
    for shard in out.glob("*.tfrecord.gz"):
        member = zlib.decompressobj(zlib.MAX_WBITS | 16)
        member.decompress(shard.read_bytes())
        assert member.eof and not member.unused_data, f"{shard.name} is one GZIP member"
        assert shard.read_bytes()[: len(HEADER)] == HEADER, "made of appended pieces, not written by the bundle"


def test_shards_are_not_in_listing_order(tmp_path):
    """The sample lists class by class; a shard must interleave classes, not keep that order."""
    out = tmp_path / "ds"
    assert main(["--output", str(out), "--num_shards", "1"]) == 0
    labels = [r["image/class/label"] for r in read_split(out, "train")]
    changes = sum(a != b for a, b in zip(labels, labels[1:], strict=False))
    assert len(set(labels)) == 3 and changes > len(labels) / 3, f"only {changes} label changes in {len(labels)} records"


def test_error_budget_exceeded_still_reports_then_fails(messy_folder, tmp_path):
    out, config = tmp_path / "ds", tmp_path / "config.yaml"
    config.write_text("image: {max_file_mib: 1}\n")  # as the messy folder's runs: padded.jpg is a dead letter
    argv = ["--input", messy_folder, "--output", out, "--config", config, "--max_error_fraction", "0.01"]
    assert main(list(map(str, argv))) == 1
    assert not (out / "manifest.json").exists(), "an untrusted run is never published"
    manifest = load_rejected(out)
    assert manifest.error_budget_exceeded and manifest.counts.errors == len(BROKEN)
    assert not list(out.glob("*.tfrecord.gz"))
    assert len(read_dead_letters(out)) == len(BROKEN)
    # Its reports stay, the copies one too (circle/UPPER_CASE.JPG is a copy of circle/0001.jpg).
    assert [p.name for p in out.glob("copies-*")] == list(manifest.copies_files) == ["copies-00000-of-00001.jsonl"]


@pytest.mark.parametrize("processes", [0, 2])
def test_fifos_and_device_links_are_dead_letters_not_hangs(tmp_path, processes):
    """A FIFO named like an image would block its read until some writer opened it, and a link
    to /dev/zero would read until memory ran out: each is a dead letter, and the run ends. Run as
    a process with a time limit, so that a hang fails the test instead of the suite."""
    source, out, config = tmp_path / "photos", tmp_path / "ds", tmp_path / "config.yaml"
    (source / "circle").mkdir(parents=True)
    for path in sorted((SAMPLE / "images/circle").iterdir())[:4]:
        shutil.copy(path, source / "circle" / path.name)
    os.mkfifo(source / "circle/pipe.jpg")
    os.symlink("/dev/zero", source / "circle/endless.jpg")
    config.write_text(f"image: {{local_processes: {processes}}}\n")
    argv = ["--input", source, "--output", out, "--config", config, "--max_error_fraction", "0.5"]
    result = run_pipeline(argv)
    assert result.returncode == 0, result.stderr[-3000:]
    letters = {pathlib.Path(d["source"]).name: d for d in read_dead_letters(out)}
    assert sorted(letters) == ["endless.jpg", "pipe.jpg"]
    assert all(d["stage"] == "read" and "not a regular file" in d["reason"] for d in letters.values()), letters
    manifest = load_manifest(out)
    assert (manifest.counts.listed, manifest.counts.written, manifest.counts.errors) == (6, 4, 2)


def test_existing_output_needs_overwrite(tmp_path):
    out = tmp_path / "ds"
    assert main(["--output", str(out)]) == 0
    first = {s for split in load_manifest(out).splits.values() for s in split.shards}
    assert main(["--output", str(out)]) == 2
    assert main(["--output", str(out), "--overwrite", "--num_shards", "2"]) == 0
    manifest = load_manifest(out)
    assert all(len(s.shards) == 2 for s in manifest.splits.values())
    assert sorted(p.name for p in out.glob("*.tfrecord.gz")) == sorted(
        s for sp in manifest.splits.values() for s in sp.shards
    )
    replaced = first - {s for split in manifest.splits.values() for s in split.shards}
    assert replaced and not any((out / name).exists() for name in replaced)  # the old shards are gone


def test_image_csv_kind(tmp_path):
    out = tmp_path / "ds"
    assert main(["--kind", "image_csv", "--output", str(out)]) == 0
    rows = [line.split(",") for line in (SAMPLE / "images.csv").read_text().splitlines()[1:]]
    expected = {}
    for split, uri, label in rows:
        split = {"TRAIN": "train", "VALIDATION": "validation", "TEST": "test"}.get(split) or assign_split(
            uri, FRACTIONS
        )
        expected[str(SAMPLE / uri)] = (split, label)
    manifest = load_manifest(out)
    actual = {
        r["image/filename"].decode(): (split, r["image/class/text"].decode())
        for split, records in all_records(out).items()
        for r in records
    }
    assert actual == expected
    assert manifest.counts.listed == len(rows) and manifest.counts.errors == 0


def test_a_source_the_job_did_not_account_for_fails_the_run(messy_folder, tmp_path):
    """Files added after planning are converted by the job's own listing, but the run must say
    its accounting does not match what was planned (the same check catches a lossy runner)."""

    source = tmp_path / "photos"
    shutil.copytree(messy_folder, source)
    config = load_config(None, {"input": str(source), "output": str(tmp_path / "ds"), "max_error_fraction": 0.5})
    plan = make_plan(config)
    shutil.copy(SAMPLE / "images/square/0002.jpg", source / "square" / "late_arrival.jpg")
    with pytest.raises(RunFailedError) as failed:
        run_leased(plan, config)
    [problem] = failed.value.reasons()
    assert f"accounted for {plan.listing.sources + 1} sources but {plan.listing.sources} were listed" in problem
    assert not (tmp_path / "ds" / "manifest.json").exists(), "an untrusted run never writes manifest.json"
    assert load_rejected(tmp_path / "ds").rejected == (problem,)


def test_a_local_run_converts_what_it_planned_while_files_land(messy_folder, tmp_path, monkeypatch):
    """On a local runner the job takes the planner's listing (transforms.listing_handover): a file
    that lands after planning waits for the next run instead of failing this one's accounting."""
    source = tmp_path / "in"
    shutil.copytree(messy_folder, source)
    late = source / "square" / "late_arrival.jpg"
    plans = []

    def plan_then_a_file_lands(config, **kwargs):
        plans.append(make_plan(config, **kwargs))
        shutil.copy(SAMPLE / "images/square/0002.jpg", late)
        return plans[-1]

    monkeypatch.setattr(convert, "make_plan", plan_then_a_file_lands)
    assert main(["--input", str(source), "--output", str(tmp_path / "ds"), "--max_error_fraction", "0.5"]) == 0
    [plan] = plans
    assert load_manifest(tmp_path / "ds").counts.listed == plan.listing.sources
    filenames = {r["image/filename"].decode() for records in all_records(tmp_path / "ds").values() for r in records}
    assert str(late) not in filenames and str(source / "square" / "0002.jpg") in filenames
    assert listing_handover.take(plan.listed_here) is None  # forgotten when the job ended
    monkeypatch.undo()
    assert (
        main(["--input", str(source), "--output", str(tmp_path / "ds"), "--max_error_fraction", "0.5", "--overwrite"])
        == 0
    )
    assert load_manifest(tmp_path / "ds").counts.listed == plan.listing.sources + 1


def run_leased(plan, config):
    """run_job as `convert` runs it: holding the output's lease."""
    with Lease(plan.output, "run1") as lease:
        lease.acquire()
        publication = FolderPublication(plan.output, "run1")
        publication.prepare()
        return run_job(plan, config, [], publication)


def test_feature_keys_are_configurable(tmp_path):
    config = tmp_path / "keys.yaml"
    config.write_text("image:\n  keys: {encoded: image/raw, label: label_id}\n")
    out = tmp_path / "ds"
    assert main(["--config", str(config), "--output", str(out), "--num_shards", "1"]) == 0
    manifest = load_manifest(out)
    assert manifest.image_keys["encoded"] == "image/raw" and manifest.image_keys["label"] == "label_id"
    assert {"image/raw", "label_id", "image/height"} <= set(manifest.features)
    assert "image/encoded" not in manifest.features
    record = read_split(out, "train")[0]
    assert record["image/raw"] == pathlib.Path(record["image/filename"].decode()).read_bytes()


def test_image_csv_edited_during_the_run_is_reported_not_crashed(tmp_path):
    """A row with a split nobody planned a writer for becomes a dead letter, and the run's
    accounting flags that the input changed."""

    shutil.copytree(SAMPLE / "images", tmp_path / "images")
    # No TEST rows: the CSV's splits are planned, and a row in another split is added later.
    rows = [row for row in (SAMPLE / "images.csv").read_text().splitlines() if not row.startswith("TEST,")]
    rows, later = rows[:20], rows[20]
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    config = load_config(
        None, {"kind": "image_csv", "input": str(tmp_path / "labels.csv"), "output": str(tmp_path / "ds")}
    )
    plan = make_plan(config)
    _, uri, label = later.split(",")
    with open(tmp_path / "labels.csv", "a") as f:
        f.write(f"TEST,{uri},{label}\n")
    with pytest.raises(RunFailedError) as failed:
        run_leased(plan, config)
    [letter] = [d for d in read_dead_letters(tmp_path / "ds") if "'test'" in d["reason"]]
    assert letter["stage"] == "parse" and "planned splits" in letter["reason"]
    assert any("accounted for 20 sources but 19 were listed" in p for p in failed.value.reasons())


def test_class_folders_a_person_reads_as_one_stay_apart_with_a_warning(tmp_path, capsys):
    """`café` copied from macOS (decomposed) beside `café` written elsewhere (composed): two
    classes, as the file system says, and a warning that names both in the summary and manifest."""
    composed, decomposed = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    for i, label in enumerate((composed, decomposed, "dog")):
        (tmp_path / "photos" / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images/circle").iterdir())[2 * i : 2 * i + 2]:
            shutil.copy(path, tmp_path / "photos" / label / path.name)
    out = tmp_path / "ds"
    assert main(["--input", str(tmp_path / "photos"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    assert manifest.label_map == (decomposed, composed, "dog")
    assert manifest.warnings == (
        "labels 'cafe\\u0301', 'caf\\xe9' differ only in case, Unicode form or spaces: each is a class of its own; "
        "rename the folders or CSV labels to one spelling to merge them",
        # Two photos each: both cafés' hash into train alone (dog's do not).
        "2 label(s) have records, but none in split 'validation': 'cafe\\u0301', 'caf\\xe9' (the split hash put all "
        "their sources elsewhere: 'validation' cannot teach or measure them)",
    )
    assert f"warning: {manifest.warnings[0]}" in capsys.readouterr().out


def test_a_class_whose_every_source_failed_is_named_in_the_warnings(tmp_path):
    for label in ("circle", "square"):
        (tmp_path / "photos" / label).mkdir(parents=True)
    for path in sorted((SAMPLE / "images/circle").iterdir())[:3]:
        shutil.copy(path, tmp_path / "photos/circle" / path.name)
    (tmp_path / "photos/square/cut.jpg").write_bytes(broken_images.truncated_jpeg())
    out = tmp_path / "ds"
    assert main(["--input", str(tmp_path / "photos"), "--output", str(out), "--max_error_fraction", "0.5"]) == 0
    manifest = load_manifest(out)
    assert manifest.label_map == ("circle", "square")  # its id is taken: a model has an output for it
    [warning] = manifest.warnings
    assert warning.startswith("1 label(s) of the label map have no records: 'square' (every source failed")


def copy_named(root: pathlib.Path, original: str, folder: str, same_split: bool) -> str:
    """Copies `original` (a path under root) into `folder` under the first new name copyN.jpg whose
    split is (or is not) the original's; that name."""
    split = assign_split(original, FRACTIONS)
    names = (f"{folder}/copy{i}.jpg" for i in itertools.count())
    name = next(n for n in names if (assign_split(n, FRACTIONS) == split) == same_split and not (root / n).exists())
    shutil.copy(root / original, root / name)
    return name


@pytest.mark.parametrize("runner", [[], ["--direct_num_workers", "2"]], ids=["lean", "parallel"])
def test_sources_with_the_same_bytes_are_records_and_named_in_the_warnings(tmp_path, runner, capsys):
    """One photo copied into the other split, one under another label, one beside itself: every
    copy is a record, and each kind of copy is a warning that names two of them and their digest."""
    root = tmp_path / "photos"
    for label in ("circle", "square"):
        (root / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:5]:
            shutil.copy(path, root / label / path.name)
    in_splits = copy_named(root, "circle/0001.jpg", "circle", same_split=False)
    under_labels = copy_named(root, "circle/0002.jpg", "square", same_split=True)
    repeated = copy_named(root, "circle/0003.jpg", "circle", same_split=True)
    out = tmp_path / "ds"
    assert main(["--input", str(root), "--output", str(out), *runner]) == 0

    manifest = load_manifest(out)
    assert manifest.counts.written == 13
    assert sum(len(records) for records in all_records(out).values()) == 13

    def example(original, copy, split_shown=False):
        split = {n: f" (split {assign_split(n, FRACTIONS)!r})" if split_shown else "" for n in (original, copy)}
        shown = [f"{root / n}{split[n]}" for n in (original, copy)]
        digest = content_digest((root / original).read_bytes()).hex()
        return f"for example {shown[0]} and {shown[1]}, xxh128 {digest})"

    splits_warning, labels_warning, repeated_warning = manifest.warnings
    assert splits_warning.startswith("1 image(s) are stored in more than one split")
    assert splits_warning.endswith(example("circle/0001.jpg", in_splits, split_shown=True))
    assert labels_warning == (
        f"1 image(s) are stored under more than one label (2 sources in all; for example {root / 'circle/0002.jpg'} "
        f"(label 'circle') and {root / under_labels} (label 'square'), "
        f"xxh128 {content_digest((root / 'circle/0002.jpg').read_bytes()).hex()})"
    )
    assert repeated_warning.startswith("1 image(s) are stored more than once in one split under one label")
    assert repeated_warning.endswith(example("circle/0003.jpg", repeated))
    printed = capsys.readouterr().out
    assert all(f"warning: {w}" in printed for w in manifest.warnings)
    assert "every group of sources with the same bytes: copies-00000-of-00001.jsonl" in printed
    assert main(["inspect", str(out)]) == 0
    assert "every group of sources with the same bytes: copies-00000-of-00001.jsonl" in capsys.readouterr().out

    # Every group is in the copies report, which the manifest names; an overwrite (staged, then
    # moved in) keeps it, and a run without copies writes none.
    pairs = {"circle/0001.jpg": in_splits, "circle/0002.jpg": under_labels, "circle/0003.jpg": repeated}
    assert main(["--input", str(root), "--output", str(out), "--overwrite", *runner]) == 0
    assert load_manifest(out).copies_files == ("copies-00000-of-00001.jsonl",)
    report = [json.loads(line) for line in (out / "copies-00000-of-00001.jsonl").read_text().splitlines()]
    expected = sorted(sorted(str(root / n) for n in pair) for pair in pairs.items())
    assert sorted([c["source"] for c in group["copies"]] for group in report) == expected
    for group in report:
        names = [pathlib.Path(c["source"]).relative_to(root).as_posix() for c in group["copies"]]
        assert group["xxh128"] == content_digest((root / names[0]).read_bytes()).hex()
        assert [c["split"] for c in group["copies"]] == [assign_split(n, FRACTIONS) for n in names]
    assert not list(out.glob(".staging-*"))
    for copy in (in_splits, under_labels, repeated):
        (root / copy).unlink()
    assert main(["--input", str(root), "--output", str(out), "--overwrite", *runner]) == 0
    assert (load_manifest(out).copies_files, list(out.glob("copies-*"))) == ((), [])


@pytest.mark.parametrize("runner", [[], ["--direct_num_workers", "2"]], ids=["lean", "parallel"])
def test_photos_held_sideways_are_named_or_stored_as_a_viewer_shows_them(tmp_path, runner):
    """EXIF orientation, which TensorFlow ignores: by default each such source is stored as it is
    and the warnings name one; with `image.exif_orientation: apply` it is stored turned."""
    root = tmp_path / "photos"
    for label in ("circle", "square"):
        (root / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:3]:
            shutil.copy(path, root / label / path.name)
    (root / "square/sideways.jpg").write_bytes(broken_images.exif_oriented(6))
    (root / "square/upside_down.png").write_bytes(broken_images.exif_oriented(3, "PNG"))
    config = tmp_path / "apply.yaml"
    config.write_text("image: {exif_orientation: apply}\n")
    for out, extra in ((tmp_path / "kept", []), (tmp_path / "applied", ["--config", str(config)])):
        assert main(["--input", str(root), "--output", str(out), *runner, *extra]) == 0

    kept, applied = load_manifest(tmp_path / "kept"), load_manifest(tmp_path / "applied")
    assert kept.warnings == (
        "2 source(s) have an EXIF orientation, which TensorFlow's decoders ignore: their records decode as stored, "
        f"turned or mirrored from what a photo viewer shows (for example {root / 'square/sideways.jpg'}: "
        "orientation 6, 'Rotate 90 CW' as exiftool names it); image.exif_orientation: apply stores them as a viewer "
        "shows them",
    )
    assert (kept.counts.converted, applied.counts.converted, applied.warnings) == (0, 2, ())
    for out, shape in ((tmp_path / "kept", (48, 64, 3)), (tmp_path / "applied", (64, 48, 3))):
        [record] = [
            r for split in all_records(out).values() for r in split if r["image/filename"].endswith(b"sideways.jpg")
        ]
        pixels = tf.io.decode_image(record["image/encoded"], expand_animations=False).numpy()
        assert pixels.shape == shape == (record["image/height"], record["image/width"], 3)
