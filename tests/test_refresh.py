"""`python -m pipeline refresh`: versions, ROOT/LATEST, skipping unchanged input, stable splits,
failed runs, retention; on local disk and on the GCS emulator (real Beam runs, nothing mocked)."""

from __future__ import annotations

import datetime
import json
import logging
import os
import pathlib
import shutil

import pytest

from core.contract.folders import dataset_folder
from core.contract.layout import REJECTED_MANIFEST_NAME, SHARD_PARTS_FOLDER, SOURCES_NAME
from core.contract.manifest import Counts, Manifest, read_manifest
from core.contract.versions import LATEST_NAME, is_version, new_version
from core.storage import children, read_text, text_reader
from pipeline.cli import main
from pipeline.commands import refresh as refresh_command
from pipeline.lease import Fence, Lease
from pipeline.planning import make_plan
from pipeline.source_list import read_sources
from pipeline.version_changes import version_changes
from pipeline.version_store import NotPublished, VersionPublication, apply_retention, version_states
from tests import broken_images
from tests.dataset_reader import load_manifest, read_split
from tests.gcs_emulator import split_gs_uri
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from trainer import manifest_io
from trainer.errors import TrainerError
from transforms.splits import assign_split

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample" / "images"
FRACTIONS = (("train", 0.8), ("validation", 0.2))


class LocalStore:
    def __init__(self, base: pathlib.Path):
        self.base = base

    def uri(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def put(self, rel: str, data: bytes) -> None:
        path = self.base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def snapshot(self, rel: str) -> dict:
        """Every file below rel with its size and mtime: any write changes it."""
        root = self.base / rel
        return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}

    def files(self, rel: str) -> list[str]:
        return sorted(str(p.relative_to(self.base / rel)) for p in (self.base / rel).rglob("*") if p.is_file())

    def download(self, rel: str, local: pathlib.Path) -> pathlib.Path:
        return self.base / rel


class GcsStore:
    def __init__(self, emulator, bucket: str):
        self.emulator, self.bucket = emulator, bucket

    def uri(self, rel: str) -> str:
        return f"gs://{self.bucket}/{rel}"

    def put(self, rel: str, data: bytes) -> None:
        self.emulator.upload_bytes(self.uri(rel), data)

    def snapshot(self, rel: str) -> dict:
        return {b.name: (b.size, b.generation, b.updated) for b in self.emulator.list_blobs(self.uri(rel) + "/")}

    def files(self, rel: str) -> list[str]:
        prefix = self.uri(rel) + "/"
        return sorted(u[len(prefix) :] for u in self.emulator.list_uris(prefix))

    def download(self, rel: str, local: pathlib.Path) -> pathlib.Path:
        self.emulator.download_to(self.emulator.list_uris(self.uri(rel) + "/"), local)
        return local


@pytest.fixture(params=["local", "gcs"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalStore(tmp_path / "bucket")
    return GcsStore(request.getfixturevalue("gcs_emulator"), request.getfixturevalue("gcs_bucket"))


def seed_input(store, per_class: int = 4) -> list[str]:
    """A few real sample images in class folders; returns their keys below the input root."""
    keys = []
    for label_dir in sorted(SAMPLE.iterdir()):
        for path in sorted(label_dir.iterdir())[:per_class]:
            key = f"{label_dir.name}/{path.name}"
            store.put(f"in/{key}", path.read_bytes())
            keys.append(key)
    return keys


def refresh(store, *flags: str) -> int:
    return main(["refresh", "--input", store.uri("in"), "--output", store.uri("root"), *flags])


def latest(store) -> str:
    return read_text(store.uri(f"root/{LATEST_NAME}"), inside=store.uri("root")).strip()


def split_of_each_source(store, version: str, tmp_path: pathlib.Path) -> dict[str, str]:
    """{key below the input root: split} from the records of one version, read with TensorFlow."""
    folder = store.download(f"root/{version}", tmp_path / f"dl-{version}")
    prefix = store.uri("in") + "/"
    return {
        record["image/filename"].decode().removeprefix(prefix): split
        for split in ("train", "validation")
        for record in read_split(folder, split)
    }


def add_source(store, key: str = "square/added.jpg") -> str:
    store.put(f"in/{key}", broken_images.image_bytes("JPEG", "RGB"))
    return key


def test_the_first_refresh_publishes_a_version_that_latest_names(store, tmp_path):
    keys = seed_input(store)
    assert refresh(store) == 0
    v1 = latest(store)
    assert is_version(v1) and version_states(store.uri("root")) == {v1: "complete"}
    assert dataset_folder(store.uri("root"), text_reader(store.uri("root")), children) == store.uri(f"root/{v1}")
    assert split_of_each_source(store, v1, tmp_path) == {key: assign_split(key, FRACTIONS) for key in keys}


def test_unchanged_input_is_skipped_and_nothing_is_written(store, capsys):
    seed_input(store)
    assert refresh(store) == 0
    before = store.snapshot("root")
    capsys.readouterr()
    assert refresh(store) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert store.snapshot("root") == before  # not even LATEST rewritten


def test_a_new_source_makes_a_new_version_and_no_source_changes_split(store, tmp_path):
    seed_input(store)
    assert refresh(store) == 0
    v1 = latest(store)
    added = add_source(store)
    assert refresh(store) == 0
    v2 = latest(store)
    assert v2 > v1
    splits_v1, splits_v2 = (split_of_each_source(store, v, tmp_path) for v in (v1, v2))
    assert set(splits_v2) == set(splits_v1) | {added}
    assert {key: splits_v2[key] for key in splits_v1} == splits_v1
    assert splits_v2[added] == assign_split(added, FRACTIONS)


def test_a_source_that_lands_after_planning_waits_for_the_next_refresh(store, tmp_path, monkeypatch):
    """The job takes the planner's listing (transforms.listing_handover), local or gs://."""
    seed_input(store)

    def plan_then_a_source_lands(config, **kwargs):
        plan = make_plan(config, **kwargs)
        add_source(store)
        return plan

    monkeypatch.setattr(refresh_command, "make_plan", plan_then_a_source_lands)
    assert refresh(store) == 0
    monkeypatch.undo()
    v1 = latest(store)
    assert "square/added.jpg" not in split_of_each_source(store, v1, tmp_path)
    assert refresh(store) == 0
    assert "square/added.jpg" in split_of_each_source(store, latest(store), tmp_path) and latest(store) > v1


def test_a_run_over_its_error_budget_leaves_latest_and_only_its_report(store):
    """A truncated JPEG is caught while reading: exit 1, LATEST stays, and the failed version has
    no manifest.json and no shards, only the error report and the rejected manifest."""
    seed_input(store)
    assert refresh(store) == 0
    v1 = latest(store)
    store.put("in/circle/truncated.jpg", broken_images.truncated_jpeg())
    assert refresh(store, "--max_error_fraction", "0") == 1
    assert latest(store) == v1
    assert dataset_folder(store.uri("root"), text_reader(store.uri("root")), children) == store.uri(f"root/{v1}")
    [failed] = [v for v, state in version_states(store.uri("root")).items() if state == "rejected"]
    assert failed > v1
    assert store.files(f"root/{failed}") == ["errors-00000-of-00001.jsonl", REJECTED_MANIFEST_NAME]
    assert "circle/truncated.jpg" in read_text(
        store.uri(f"root/{failed}/errors-00000-of-00001.jsonl"), inside=store.uri("root")
    )


def test_keep_deletes_older_and_failed_versions_once_a_new_one_is_published(store):
    seed_input(store)
    assert refresh(store) == 0
    v1 = latest(store)
    store.put("in/circle/truncated.jpg", broken_images.truncated_jpeg())
    assert refresh(store, "--max_error_fraction", "0") == 1
    store.put("in/circle/truncated.jpg", broken_images.image_bytes("JPEG", "RGB", (32, 32)))  # input fixed
    assert refresh(store, "--keep", "1") == 0
    v2 = latest(store)
    assert v2 > v1
    assert version_states(store.uri("root")) == {v2: "complete"}
    assert sorted(store.files("root")) == sorted([LATEST_NAME] + [f"{v2}/{f}" for f in store.files(f"root/{v2}")])


def _version(now: datetime.datetime, hours_ago: float) -> str:
    return new_version(now - datetime.timedelta(hours=hours_ago))


def _lay_out(store, root: str, layout: dict[str, str], latest_version: str) -> None:
    for version, name in layout.items():
        store.put(f"{root}/{version}/{name}", b"{}")
    store.put(f"{root}/{LATEST_NAME}", (latest_version + "\n").encode())


def test_retention_never_deletes_what_latest_names_or_anything_newer(store):
    """Folders laid out by hand, as crashed, failed and rolled-back refreshes leave them."""
    now = datetime.datetime.now(datetime.timezone.utc)
    old, older_failed, abandoned, pointed, newer_a, newer_b, newer_unfinished = (
        _version(now, h) for h in (200, 150, 120, 100, 80, 60, 50)
    )
    _lay_out(
        store,
        "root",
        {
            old: "manifest.json",
            older_failed: REJECTED_MANIFEST_NAME,
            abandoned: "train-00000-of-00001.tfrecord.gz",
            pointed: "manifest.json",
            newer_a: "manifest.json",
            newer_b: "manifest.json",
            newer_unfinished: "beam-temp-x/part",
        },
        latest_version=pointed,
    )  # LATEST rolled back by an operator
    store.put("root/notes/README", b"not a version: never touched")

    deleted = apply_retention(store.uri("root"), keep=1, latest=pointed)

    # keep=1 would keep only newer_b, but LATEST's version is kept whatever K says, and nothing
    # newer than it is touched (a newer folder may be a run in progress).
    assert sorted(deleted) == sorted([old, older_failed, abandoned])
    assert set(version_states(store.uri("root"))) == {pointed, newer_a, newer_b, newer_unfinished}
    assert "notes/README" in store.files("root")
    assert latest(store) == pointed

    # A young folder without a manifest, older than LATEST, may still be running: left alone.
    old, young_running, pointed = (_version(now, h) for h in (10, 1.5, 1))
    _lay_out(
        store,
        "root2",
        {old: "manifest.json", young_running: "beam-temp-x/part", pointed: "manifest.json"},
        latest_version=pointed,
    )
    assert apply_retention(store.uri("root2"), keep=1, latest=pointed) == [old]
    assert set(version_states(store.uri("root2"))) == {young_running, pointed}


def test_latest_never_moves_back_to_an_older_version(store):
    """LATEST newer than a run's version was written by something without the root's lease: the
    run's version is not published, and the run says so by failing (never exit 0)."""
    newer, older = "20300101T000000Z", "20290101T000000Z"
    store.put(f"root/{LATEST_NAME}", (newer + "\n").encode())
    manifest = Manifest(kind="images", splits={}, features={}, counts=Counts(0, 0, 0, 0, 0))
    root = store.uri("root")
    with Lease(root, "run-1") as lease:
        lease.acquire()
        with Fence(root, "run-1") as fence:
            with pytest.raises(NotPublished, match=newer):
                VersionPublication(root, older, "run-1").advance(manifest, fence)
            assert latest(store) == newer
            newest = VersionPublication(root, "20310101T000000Z", "run-1")
            newest.prepare()  # its folder, where LATEST's new bytes wait to be renamed into place
            newest.advance(manifest, fence)
    assert latest(store) == "20310101T000000Z"


def test_a_root_is_followed_with_tensorflow_io_as_the_trainer_calls_it(tmp_path):
    root = tmp_path / "root"
    (root / "20250101T000000Z").mkdir(parents=True)
    assert manifest_io.resolve_data(str(root)) == str(root)  # no LATEST, no version to the microsecond
    (root / LATEST_NAME).write_text("20250101T000000Z\n")
    assert manifest_io.resolve_data(str(root)) == f"{root}/20250101T000000Z"
    assert dataset_folder(str(root) + "/", text_reader(str(root)), children) == f"{root}/20250101T000000Z"
    (root / LATEST_NAME).write_text("../elsewhere\n")
    with pytest.raises(TrainerError, match="must hold the name of one version folder"):
        manifest_io.resolve_data(str(root))


def test_reading_latest_passes_on_errors_other_than_not_found(tmp_path):
    def missing(path):
        raise FileNotFoundError(path)

    def denied(path):
        raise PermissionError(path)

    def names(folder):
        return [LATEST_NAME]

    assert dataset_folder(str(tmp_path), missing, names) == str(tmp_path)
    with pytest.raises(PermissionError):
        dataset_folder(str(tmp_path), denied, names)


def test_refresh_flag_errors_exit_2_and_write_nothing(tmp_path):
    shutil.copytree(SAMPLE / "circle", tmp_path / "in" / "circle")
    assert main(["refresh", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "root"), "--keep", "0"]) == 2
    assert main(["refresh", "--input", str(tmp_path / "nothing"), "--output", str(tmp_path / "root")]) == 2
    assert not os.path.exists(tmp_path / "root")


def test_a_refresh_killed_mid_run_leaves_latest_and_the_next_refresh_works(tmp_path):
    """SIGKILL (a preempted VM, an OOM kill) while the job writes: LATEST still names v1, the
    partial version has no manifest.json (so no reader takes it for complete), and the next
    refresh publishes normally."""
    import signal
    import subprocess
    import sys
    import time

    source, root = tmp_path / "photos", tmp_path / "root"
    for label_dir in sorted(SAMPLE.iterdir()):
        (source / label_dir.name).mkdir(parents=True)
        for path in sorted(label_dir.iterdir())[:4]:
            shutil.copy(path, source / label_dir.name / path.name)
    assert main(["refresh", "--input", str(source), "--output", str(root)]) == 0
    v1 = (root / LATEST_NAME).read_text().strip()
    for copy in range(12):  # enough work (~1,400 images) that the job is still writing when killed
        for label_dir in sorted(SAMPLE.iterdir()):
            for path in sorted(label_dir.iterdir()):
                shutil.copy(path, source / label_dir.name / f"{copy}-{path.name}")

    run = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "refresh", "--input", str(source), "--output", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    # The job is writing once a version folder holds shard parts (the default local runner) or
    # Beam's temporary files (WriteToTFRecord).
    writing = ("*/" + SHARD_PARTS_FOLDER, "*/beam-temp-*")
    while not any(list(root.glob(g)) for g in writing) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert run.poll() is None, "the refresh finished before it could be interrupted"
    run.send_signal(signal.SIGKILL)
    run.wait()

    assert (root / LATEST_NAME).read_text().strip() == v1
    partial = [p for p in root.iterdir() if p.is_dir() and p.name != v1]
    assert partial and not any((p / "manifest.json").exists() for p in partial)
    assert dataset_folder(str(root), text_reader(str(root)), children) == f"{root}/{v1}"

    assert main(["refresh", "--input", str(source), "--output", str(root)]) == 0
    v2 = (root / LATEST_NAME).read_text().strip()
    assert v2 > v1 and (root / v2 / "manifest.json").exists()
    assert not any(p.exists() for p in partial), "the next refresh removes the dead run's version folder"
    assert not (root / ".lease").exists()


def test_two_refreshes_started_together_one_refuses(tmp_path, caplog, capsys):
    """Only one refresh writes below a root at a time; the other exits 2 naming the holder, and
    a later one finds nothing changed. Version names never collide, even within a second."""
    import subprocess
    import sys
    import time

    shutil.copytree(SAMPLE / "circle", tmp_path / "in" / "circle")
    argv = ["refresh", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "root")]
    first = subprocess.Popen([sys.executable, "-m", "pipeline", *argv], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while not (tmp_path / "root" / ".lease").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert main(argv) == 2 and f"pid {first.pid}" in caplog.text
    assert first.wait(timeout=SUBPROCESS_TIMEOUT) == 0, first.stderr.read()[-3000:]
    assert [p.name for p in (tmp_path / "root").iterdir() if is_version(p.name)] == [
        (tmp_path / "root" / LATEST_NAME).read_text().strip()
    ]
    assert main(argv) == 0 and "nothing changed" in capsys.readouterr().out
    assert len({new_version() for _ in range(1000)}) > 1


def test_a_new_class_keeps_every_earlier_class_id(store, tmp_path):
    """`apple` sorts before every class of version 1: a sorted label map would have moved every
    id by one, and a model trained on version 1 would read version 2's records with wrong classes."""
    seed_input(store)
    assert refresh(store) == 0
    v1 = latest(store)
    add_source(store, "apple/new.jpg")
    assert refresh(store) == 0
    v2 = latest(store)
    first, second = (load_manifest(store.download(f"root/{v}", tmp_path / f"m-{v}")) for v in (v1, v2))
    assert first.label_map == ("circle", "square", "triangle")
    assert second.label_map == ("circle", "square", "triangle", "apple")
    new_label = (
        "1 label(s) are new since the previous version, after its 3 label(s): 'apple'; a model trained on that "
        "version has no output for them"
    )
    assert new_label in second.warnings and not any("are new since" in w for w in first.warnings)
    folder = store.download(f"root/{v2}", tmp_path / f"dl-{v2}")
    ids = {
        record["image/class/text"].decode(): record["image/class/label"]
        for split in ("train", "validation")
        for record in read_split(folder, split)
    }
    assert ids == {"circle": 0, "square": 1, "triangle": 2, "apple": 3}


def test_a_version_holds_its_copies_report(store, tmp_path):
    """Written beside the version's records, on GCS as locally, and named by its manifest."""
    keys = seed_input(store)
    store.put("in/triangle/copy.jpg", (SAMPLE / keys[0]).read_bytes())
    assert refresh(store) == 0
    version = latest(store)
    folder = store.download(f"root/{version}", tmp_path / version)
    manifest = load_manifest(folder)
    assert manifest.copies_files == ("copies-00000-of-00001.jsonl",)
    [group] = [json.loads(line) for line in (folder / manifest.copies_files[0]).read_text().splitlines()]
    assert [c["label"] for c in group["copies"]] == [keys[0].split("/")[0], "triangle"]
    assert any(w.startswith("1 image(s) are stored under more than one label") for w in manifest.warnings)


def test_a_version_fingerprinted_the_old_way_is_refreshed_once_saying_why(tmp_path, capsys, caplog):
    """Versions published before the order-independent fingerprint hold the SHA-256 of the sorted
    listing, which no listing matches now: the next refresh says so and converts again, once."""
    store = LocalStore(tmp_path / "bucket")
    seed_input(store)
    assert refresh(store) == 0
    manifest_path = pathlib.Path(store.uri(f"root/{latest(store)}")) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["listing"]["fingerprint"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    first = latest(store)
    caplog.set_level(logging.INFO)
    assert refresh(store) == 0
    assert "fingerprinted by an older method" in caplog.text
    second = latest(store)
    assert second != first
    assert refresh(store) == 0
    assert "nothing changed" in capsys.readouterr().out and latest(store) == second
    assert caplog.text.count("older method") == 1


def test_a_version_names_the_sources_it_was_made_of_and_what_changed(store):
    keys = seed_input(store)
    assert refresh(store) == 0
    v1 = latest(store)
    removed, changed = keys[0], keys[-1]
    store.put(f"in/{changed}", broken_images.image_bytes("JPEG", "RGB", (80, 60)))
    added = add_source(store)
    if isinstance(store, LocalStore):
        (store.base / "in" / removed).unlink()
    else:
        bucket, name = split_gs_uri(store.uri(f"in/{removed}"))
        store.emulator.client.bucket(bucket).blob(name).delete()
    assert refresh(store) == 0
    v2 = latest(store)
    root = store.uri("root")
    manifest = read_manifest(store.uri(f"root/{v2}"), text_reader(root))
    assert (manifest.previous_version, manifest.sources_file) == (v1, SOURCES_NAME)
    listed = [entry.path for entry in read_sources(store.uri(f"root/{v2}/{SOURCES_NAME}"), inside=root)]
    assert listed == sorted(store.uri(f"in/{key}") for key in {*keys, added} - {removed})
    changes = version_changes(store.uri(f"root/{v2}"), manifest)
    s = changes.sources
    assert (s.added, s.removed, s.changed, s.unchanged) == (1, 1, 1, len(keys) - 2)
    assert (s.first_added, s.first_removed, s.first_changed) == (
        [store.uri(f"in/{added}")],
        [store.uri(f"in/{removed}")],
        [store.uri(f"in/{changed}")],
    )
    assert changes.counts[0] == ("records", len(keys), len(keys))
