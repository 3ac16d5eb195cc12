"""Planning that holds neither the listing nor the rows: the order-independent fingerprint, listing
side by side (local and on the GCS emulator), and an image CSV's bounded tally checked against the
in-memory resolution of the same rows, on generated cases."""

from __future__ import annotations

import gc
import hashlib
import os
import pathlib
import tempfile
import threading

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from core import storage
from pipeline import planning
from pipeline.config import load_config
from pipeline.listing_digest import ListingDigest
from pipeline.planning import make_plan
from tests.image_csv_outcomes import parse_image_csv
from transforms.outcomes import Source
from transforms.sources import ClassFolders, ListClassFolders, Roots

names = st.text(st.characters(codec="utf-8", exclude_characters="\t\n\0"), min_size=1, max_size=12)
entries = st.lists(
    st.tuples(names, st.integers(0, 2**40), st.floats(0, 2e9, allow_nan=False)), unique_by=lambda e: e[0], max_size=30
)


def fingerprint(listing) -> str:
    digest = ListingDigest()
    for path, size, mtime in listing:
        digest.add(path, size, mtime)
    return digest.fingerprint


@given(entries, st.randoms())
def test_the_fingerprint_does_not_depend_on_the_order_entries_come_in(listing, random):
    shuffled = list(listing)
    random.shuffle(shuffled)
    assert fingerprint(shuffled) == fingerprint(listing)


@given(entries.filter(bool), st.data())
def test_the_fingerprint_changes_when_any_entry_is_added_removed_or_changed(listing, data):
    at = data.draw(st.integers(0, len(listing) - 1))
    path, size, mtime = listing[at]
    changed = data.draw(
        st.sampled_from(
            [
                [*listing[:at], *listing[at + 1 :]],  # removed
                [*listing, (path + "/new", size, mtime)],  # added
                [*listing[:at], (path, size + 1, mtime), *listing[at + 1 :]],  # grew
                [*listing[:at], (path, size, mtime + 1), *listing[at + 1 :]],  # touched
                [*listing[:at], (path + "x", size, mtime), *listing[at + 1 :]],  # renamed
            ]
        )
    )
    assert fingerprint(changed) != fingerprint(listing)


def test_an_unlisted_entry_counts_apart_from_a_file_of_its_name():
    unlisted = ListingDigest()
    unlisted.add_unlisted("a/b")
    assert unlisted.fingerprint != fingerprint([("a/b", 0, 0)]) != ListingDigest().fingerprint


def test_the_fingerprint_of_a_listing_stays_what_it_was():
    """Pinned: a published version's fingerprint must still match its unchanged input, or every
    refresh would convert it again."""
    digest = ListingDigest()
    digest.add("gs://b/in/cat/1.jpg", 54321, 1735702045.345)
    digest.add("/d/in/cat/é.png", 0, 1700000000.0)
    digest.add(os.fsdecode(b"/d/in/cat/bad\xff.jpg"), 2**40, 1e-07)
    digest.add("/d/in/dog/2.jpg", 7, 1735689600)
    digest.add_unlisted("/d/in/locked")
    assert digest.fingerprint == "set-sha256:05f6174d582cea81a3f199567677d5dd9c46a15216d15b50129b21f52964dc64"


@given(entries)
def test_the_fingerprint_sums_each_entry_line_s_sha256(listing):
    """The method the fingerprint's prefix names: each entry's line `path<TAB>size<TAB>mtime<LF>`
    hashed, the digests added modulo 2**256, whatever the listing's size."""
    lines = [f"{path}\t{size}\t{mtime}\n".encode("utf-8", "surrogateescape") for path, size, mtime in listing]
    total = sum(int.from_bytes(hashlib.sha256(line).digest(), "big") for line in lines) % 2**256
    assert fingerprint(listing) == f"set-sha256:{total:064x}"


# --- listing side by side

trees = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "[x]", "d*"]), min_size=1, max_size=4).map("/".join),
    unique=True,
    max_size=25,
)


def make_tree(root: pathlib.Path, paths: list[str]) -> None:
    for path in paths:
        target = root / path
        if any(p.is_file() for p in target.parents if root in p.parents):
            continue  # a file already holds this name as a folder
        if target.is_dir():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.encode())


def key(entry) -> tuple:
    """What a listing entry says, comparable: a file's path, size and mtime, or what could not be listed."""
    if isinstance(entry, storage.Unlisted):
        return ("unlisted", entry.path, entry.reason)
    return ("file", entry.path, entry.size_in_bytes, entry.last_updated_in_seconds)


@settings(max_examples=25, deadline=None)
@given(trees)
def test_listing_sub_folders_side_by_side_lists_what_one_at_a_time_lists(paths):
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp) / "in"
        root.mkdir()
        make_tree(root, paths)
        os.symlink(root / "missing", root / "dangling")
        serial = sorted(map(key, storage.list_below(str(root), threads=1)))
        assert sorted(map(key, storage.list_below(str(root), threads=4))) == serial
        files = sorted(str(p) for p in root.rglob("*") if p.is_file())
        assert sorted(e.path for e in storage.list_below(str(root)) if isinstance(e, storage.FileMetadata)) == files


def test_a_gs_listing_with_threads_lists_every_object_once_on_the_emulator(gcs_emulator, gcs_bucket):
    """Against a server that answers a whole listing in one reply and ignores name ranges
    (tests/core/test_range_listing.py has the paging stand-in, which takes them)."""
    names = [f"in/c{c}/{i}.jpg" for c in range(12) for i in range(5)] + ["in/top.jpg", "in/c3/deep/x.jpg"]
    for name in names:
        gcs_emulator.upload_bytes(f"gs://{gcs_bucket}/{name}", name.encode())
    root = f"gs://{gcs_bucket}/in"
    listing = list(storage.list_below(root, threads=6))
    assert sorted(e.path for e in listing) == sorted(f"gs://{gcs_bucket}/{n}" for n in names)
    assert sorted(map(key, listing)) == sorted(map(key, storage.list_below(root, threads=1)))


def test_a_listing_stopped_early_stops_its_threads(tmp_path):
    for c in range(8):
        (tmp_path / f"c{c}").mkdir()
        for i in range(300):
            (tmp_path / f"c{c}" / f"{i}.jpg").write_bytes(b"x")
    listing = storage.list_below(str(tmp_path), threads=4)
    next(listing)
    listing.close()
    assert not [t for t in threading.enumerate() if t.name == "list"]


def test_an_error_in_a_listing_thread_is_raised_to_the_caller():
    def list_one(folder):
        if folder == "bad":
            raise PermissionError("no listing for you")
        yield from range(100)

    with pytest.raises(PermissionError, match="no listing for you"):
        list(storage.side_by_side(["a", "bad", "b", "c"], list_one, threads=3))
    assert not [t for t in threading.enumerate() if t.name == "list"]


# --- planning


def test_a_plan_lists_with_threads_or_without_alike(tmp_path):
    for c in ("cat", "dog", "eel"):
        (tmp_path / "in" / c).mkdir(parents=True)
        for i in range(3):
            (tmp_path / "in" / c / f"{i}.jpg").write_bytes(b"x" * (i + 1))
    plans = [
        make_plan(load_config(overrides={"input": str(tmp_path / "in"), "output": "o", "listing_threads": n}))
        for n in (1, 8)
    ]
    assert plans[0].listing == plans[1].listing and plans[0].split_bytes == plans[1].split_bytes
    assert plans[0].label_map == ("cat", "dog", "eel")


def test_a_listing_too_large_to_hand_over_is_listed_again_by_the_job(tmp_path, monkeypatch):
    (tmp_path / "in" / "cat").mkdir(parents=True)
    for i in range(5):
        (tmp_path / "in" / "cat" / f"{i}.jpg").write_bytes(b"x")
    config = load_config(overrides={"input": str(tmp_path / "in"), "output": "o"})
    assert make_plan(config, hand_over=True).listed_here is not None
    monkeypatch.setattr(planning, "HAND_OVER_LIMIT", 4)
    assert make_plan(config, hand_over=True).listed_here is None


def test_planning_lists_with_what_was_loaded_frozen_and_then_unfreezes_it(tmp_path, monkeypatch):
    (tmp_path / "in" / "cat").mkdir(parents=True)
    (tmp_path / "in" / "cat" / "0.jpg").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    frozen_while_listing, list_below = [], storage.list_below

    def listing(*args):
        frozen_while_listing.append(gc.get_freeze_count())
        return list_below(*args)

    monkeypatch.setattr(storage, "list_below", listing)
    assert gc.get_freeze_count() == 0
    make_plan(load_config(overrides={"input": str(tmp_path / "in"), "output": "o"}))
    assert frozen_while_listing[0] > 1000 and gc.get_freeze_count() == 0
    with pytest.raises(planning.PlanError, match="no images in class folders"):
        make_plan(load_config(overrides={"input": str(tmp_path / "empty"), "output": "o"}))
    assert gc.get_freeze_count() == 0


rows = st.lists(
    st.tuples(
        st.sampled_from(["a.jpg", "b.jpg", "c.jpg", "sub/d.jpg", "sub/e.jpg", "missing.jpg", "gone/f.jpg"]),
        st.sampled_from(["cat", "dog", "eel"]),
        st.sampled_from(["TRAIN", "VALIDATION", "", "HOLDOUT"]),
    ),
    max_size=20,
)
SIZES = {"a.jpg": 3, "b.jpg": 50, "c.jpg": 700, "sub/d.jpg": 9000, "sub/e.jpg": 11}
FRACTIONS = (("train", 0.8), ("validation", 0.2))


@settings(max_examples=40, deadline=None)
@given(rows)
def test_an_image_csv_plan_agrees_with_resolving_its_rows_in_memory(csv_rows):
    """Labels, bytes per split and the listing's totals, as the in-memory resolution of the same
    rows (duplicates, conflicts, unknown splits, missing images) gives them."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        for name, size in SIZES.items():
            (folder / name).parent.mkdir(exist_ok=True)
            (folder / name).write_bytes(b"x" * size)
        text = "split,image_uri,label\n" + "".join(f"{split},{uri},{label}\n" for uri, label, split in csv_rows)
        (folder / "labels.csv").write_text(text)
        csv_uri = str(folder / "labels.csv")
        with open(csv_uri, newline="") as f:
            outcomes = list(parse_image_csv(f, csv_uri, "image_uri", "label", "split", FRACTIONS, Roots()))
        existing = [o for o in outcomes if isinstance(o, Source) and os.path.exists(o.uri)]
        config = load_config(overrides={"kind": "image_csv", "input": csv_uri, "output": "o"})
        if not [o for o in outcomes if isinstance(o, Source)]:
            with pytest.raises(planning.PlanError, match="no image rows"):
                make_plan(config)
            return
        plan = make_plan(config)
        assert plan.label_map == tuple(sorted({o.label for o in existing}))
        expected_bytes = {"train": 0, "validation": 0}
        for o in existing:
            expected_bytes[o.split] = expected_bytes.get(o.split, 0) + os.path.getsize(o.uri)
        assert plan.split_bytes == expected_bytes
        assert plan.listing.files == 1 + len(existing)
        assert plan.listing.bytes == len(text) + sum(os.path.getsize(o.uri) for o in existing)
        assert plan.listing.sources == len(outcomes)


def test_the_job_lists_gs_class_folders_in_name_ranges_as_the_planner_does(gcs_emulator, gcs_bucket):
    names = [f"in/c{c}/{i}.jpg" for c in range(5) for i in range(3)] + [
        "in/top.jpg",
        "in/c1/.hidden/x.jpg",
        "in/c2/a/b.png",
    ]
    for name in names:
        gcs_emulator.upload_bytes(f"gs://{gcs_bucket}/{name}", name.encode())
    root, extensions = f"gs://{gcs_bucket}/in", frozenset({".jpg", ".png"})
    classify = ClassFolders(root, extensions, FRACTIONS)
    expected = [classify.listed(e) for e in storage.list_below(root, threads=4)]
    assert len(expected) == len(names)
    with TestPipeline() as p:
        listed = p | beam.Impulse() | ListClassFolders(root, extensions, FRACTIONS)
        sources = listed.sources | beam.FlatMap(lambda sources: sources)
        assert_that((sources, listed.skipped, listed.dead_letters) | beam.Flatten(), equal_to(expected))
