"""pipeline.source_list: a listing in any order is written sorted by path, in runs, and reads back
as the same entries; two versions' files diff in one streaming merge exactly as sets of their
entries do (generated listings, names with every kind of character); the file is checked against
the listing's fingerprint; and neither writing nor diffing holds the listing in memory."""

from __future__ import annotations

import gzip
import random
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.contract.manifest import Listing
from pipeline.listing_digest import UNLISTED_SIZE, ListingDigest
from pipeline.source_list import SourceList, compare, read_sources, sources_problems

names = st.text(st.characters(blacklist_categories=("Cs",)) | st.sampled_from('/\n\t"\\é'), min_size=1, max_size=12)
entry = st.tuples(st.integers(UNLISTED_SIZE, 10**12), st.sampled_from([0, 1.5, 1_700_000_000.25, 1_800_000_000]))
listings = st.dictionaries(names, entry, max_size=60)


def written(tmp_path, name: str, listing: dict, run_entries: int) -> tuple[str, Listing]:
    """The listing (path -> (size, mtime)), in a random order, through a ListingDigest and its
    SourceList into a sources file; with the Listing the planner records of it."""
    listed = SourceList(run_entries)
    digest = ListingDigest(listed.add)
    for path, (size, mtime) in random.Random(len(listing)).sample(sorted(listing.items()), len(listing)):
        if size == UNLISTED_SIZE:
            digest.add_unlisted(path)
        else:
            digest.add(path, size, mtime)
    path = str(tmp_path / name)
    listed.write(path)
    return path, Listing(digest.files, digest.bytes, digest.fingerprint)


def normal(listing: dict) -> dict:
    """What the file holds of an entry: an unlisted one's time is 0."""
    return {path: (size, 0 if size == UNLISTED_SIZE else mtime) for path, (size, mtime) in listing.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=listings, after=listings, kept=listings, run_entries=st.integers(1, 7))
def test_two_versions_diff_as_their_sets_do(tmp_path, before, after, kept, run_entries):
    before, after = normal({**kept, **before}), normal({**kept, **after})
    first, listing = written(tmp_path, "before.jsonl.gz", before, run_entries)
    second, _ = written(tmp_path, "after.jsonl.gz", after, run_entries)
    entries = [tuple(e) for e in read_sources(first, inside=str(tmp_path))]
    assert entries == sorted((path, *found) for path, found in before.items())
    assert sources_problems(first, str(tmp_path), listing) == []

    found = compare(read_sources(first, inside=str(tmp_path)), read_sources(second, inside=str(tmp_path)), 3)
    added, removed = sorted(after.keys() - before.keys()), sorted(before.keys() - after.keys())
    changed = sorted(p for p in before.keys() & after.keys() if before[p] != after[p])
    assert (found.added, found.removed, found.changed) == (len(added), len(removed), len(changed))
    assert found.unchanged == len(before.keys() & after.keys()) - len(changed)
    assert (found.first_added, found.first_removed, found.first_changed) == (added[:3], removed[:3], changed[:3])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(listing=listings.filter(bool), other=listings.filter(bool))
def test_a_file_that_is_not_the_listing_is_a_problem(tmp_path, listing, other):
    path, _ = written(tmp_path, "sources.jsonl.gz", normal(listing), 3)
    _, listed = written(tmp_path, "other.jsonl.gz", normal(other), 3)
    if normal(listing) != normal(other):
        (problem,) = sources_problems(path, str(tmp_path), listed)
        assert "not the" in problem and path in problem


def test_a_file_out_of_order_or_broken_is_a_problem(tmp_path):
    path = tmp_path / "sources.jsonl.gz"
    lines = b'{"path": "b", "size": 1, "mtime": 0}\n{"path": "a", "size": 1, "mtime": 0}\n'
    path.write_bytes(gzip.compress(lines))
    (problem,) = sources_problems(str(path), str(tmp_path), Listing(2, 2, ""))
    assert "not sorted by path ('a' after 'b')" in problem
    path.write_bytes(gzip.compress(b'{"path": "a", "size": "1"}\n'))
    (problem,) = sources_problems(str(path), str(tmp_path), Listing(1, 1, ""))
    assert problem.startswith("the sources file cannot be read") and "line 1" in problem
    path.write_bytes(b"not gzip")
    assert sources_problems(str(path), str(tmp_path), Listing(1, 1, ""))


def test_writing_and_diffing_a_large_listing_hold_one_run_at_most(tmp_path):
    """200,000 entries each side: sets of them would take tens of MB; the sort holds one run
    (RUN 10,000 entries) and the merge one entry of each file."""
    total, run = 200_000, 10_000
    listing = {f"gs://bucket/photos/class-{i % 97}/{i:09d}.jpg": (i, 1_700_000_000.5) for i in range(total)}
    tracemalloc.start()
    try:
        first, _ = written(tmp_path, "before.jsonl.gz", {}, run)  # warms the imports up
        tracemalloc.reset_peak()
        listed = SourceList(run)
        for path, (size, mtime) in listing.items():  # the listing itself is the test's, counted before
            listed.add(path, size, mtime)
        listed.write(str(tmp_path / "after.jsonl.gz"))
        writing = tracemalloc.get_traced_memory()[1] - tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        found = compare(
            read_sources(first, inside=str(tmp_path)),
            read_sources(str(tmp_path / "after.jsonl.gz"), inside=str(tmp_path)),
            10,
        )
        diffing = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert found.added == total and found.first_added == sorted(listing)[:10]
    assert writing < 12e6, f"writing held {writing / 1e6:.1f} MB"
    assert diffing < 2e6, f"diffing held {diffing / 1e6:.1f} MB"
