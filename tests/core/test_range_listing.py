"""Listing one gs:// prefix in name ranges side by side lists exactly what one serial listing does,
for any names (unicode, long shared starts, names that start other names, none, one), over HTTP
against the paging GCS stand-in, on servers that take the offsets and on those that ignore them;
cut points always lie inside the range they cut, where folders start or between names; and a
listing takes a few requests a page at most, many of them in flight, however the names of its
folders and files spread."""

from __future__ import annotations

import random
import string

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import storage
from core.range_listing import MAX_NAME_BYTES, NameRange, Page, pieces_of, split_points
from tests.gcs_list_stand_in import ListStandIn
from transforms.sources import ClassFolders, ListClassFolders

FOLDER = "in/f/"
_CHARS = "0a/ü€.~\ud7ff\ue000\U0001f600\U0010ffff"
_STEMS = ["", "img000", "x" * 300 + "/", "ü" * 40]
names = st.lists(
    st.builds(lambda stem, tail: stem + tail, st.sampled_from(_STEMS), st.text(st.sampled_from(_CHARS), max_size=4)),
    max_size=60,
    unique=True,
).map(sorted)
FRACTIONS = (("train", 0.8), ("validation", 0.2))


@pytest.fixture(scope="module")
def stand_in():
    with ListStandIn(names=[], bucket="b") as gcs:
        yield gcs


@pytest.fixture
def gcs(stand_in, monkeypatch):
    for name, value in stand_in.env.items():
        monkeypatch.setenv(name, value)
    stand_in.page_size, stand_in.takes_offsets, stand_in.page_latency = 3, True, 0.0
    return stand_in


def entries(listing) -> list[tuple]:
    return [(m.path, m.size_in_bytes, m.last_updated_in_seconds) for m in listing]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names, st.booleans(), st.sampled_from([2, 5, 16]))
def test_a_split_listing_lists_every_object_of_a_serial_one_exactly_once(gcs, listed, takes_offsets, threads):
    gcs.serve(sorted({FOLDER + name for name in listed} | {"in/e", "in/f", "in/f0", "in/g/x"}))
    gcs.takes_offsets = takes_offsets
    folder = "gs://b/" + FOLDER.rstrip("/")
    serial = entries(storage.list_tree(folder, threads=1))
    assert [path for path, _, _ in serial] == [f"gs://b/{FOLDER}{name}" for name in listed]
    assert sorted(entries(storage.list_tree(folder, threads=threads))) == serial

    first, rest = storage.start_listing(folder, threads)
    ranged = entries(first) + [e for piece in rest for e in entries(storage.list_range(piece, threads))]
    assert sorted(ranged) == serial

    in_folder = [e for e in serial if "/" not in e[0][len(folder) + 1 :]]
    assert entries(storage.list_folder(folder)) == in_folder
    batches = list(storage.list_folders([folder, "gs://b/in/g"], threads))
    assert sorted(e for at, batch in batches if at == 0 for e in entries(batch)) == in_folder
    assert [e for at, batch in batches if at == 1 for e in entries(batch)] == entries(
        storage.list_folder("gs://b/in/g")
    )


@given(names.filter(bool), st.integers(2, 20), st.data())
def test_cut_points_lie_strictly_inside_the_rest_of_the_range_in_order(page, pieces, data):
    page = [FOLDER + name for name in page]
    end = data.draw(st.sampled_from([None, FOLDER + "\U0010ffff", page[-1] + "0", page[-1] + "\U0001f600a"]))
    rest = NameRange("b", FOLDER, page[-1], end)
    points = split_points(rest, page, pieces)
    assert len(points) <= pieces - 1
    assert all(a < b for a, b in zip([rest.start, *points], points, strict=False))
    assert all(point.startswith(FOLDER) and rest.holds(point) and point != rest.start for point in points)
    assert all(len(point.encode("utf-8")) <= MAX_NAME_BYTES for point in points)
    folders = sorted({name[: name.index("/", len(FOLDER)) + 1] for name in page if "/" in name[len(FOLDER) :]})
    shown = data.draw(st.lists(st.sampled_from(folders), unique=True).map(sorted)) if folders else []
    for list_folders in (None, lambda probe: Page([], [], None, None, False, tuple(shown))):
        cut = pieces_of(rest, page, pieces, list_folders)
        assert len(cut) <= pieces and (cut[0].start, cut[-1].end) == (rest.start, rest.end)
        assert all(a.end == b.start and a.start < a.end for a, b in zip(cut, cut[1:], strict=False))


def test_a_flat_folder_is_listed_with_many_requests_in_flight(gcs):
    gcs.serve([f"{FOLDER}img{i:07d}.jpg" for i in range(40_000)])
    gcs.page_size, gcs.page_latency = 1000, 0.1
    gcs.reset()
    assert sum(1 for _ in storage.list_below("gs://b/in", threads=16)) == 40_000
    assert gcs.max_lists_in_flight >= 8
    assert gcs.list_requests <= 4 * 40  # the pages, and the pieces that end short of one: no listing twice


def test_many_small_class_folders_take_as_many_list_requests_as_pages(gcs):
    """The whole prefix is one listing in name ranges, not a listing per folder: 40,000 objects in
    4,000 class folders take about 40 requests, not 4,000, with many in flight."""
    gcs.serve([f"in/class{c:04d}/img{i}.jpg" for c in range(4000) for i in range(10)])
    gcs.page_size, gcs.page_latency = 1000, 0.1
    gcs.reset()
    assert sum(1 for _ in storage.list_below("gs://b/in", threads=16)) == 40_000
    assert gcs.max_lists_in_flight >= 8
    assert gcs.list_requests <= 4 * 40


def test_the_job_lists_a_folder_in_ranges_what_the_planner_lists(gcs):
    gcs.serve(sorted([f"{FOLDER}{i:03d}.jpg" for i in range(40)] + ["in/g/a.png", "in/top.jpg", "in/f/.h/x.jpg"]))
    root, extensions = "gs://b/in", frozenset({".jpg", ".png"})
    classify = ClassFolders(root, extensions, FRACTIONS)
    expected = [classify.listed(e) for e in storage.list_below(root, threads=4)]
    assert len(expected) == 43
    with TestPipeline() as p:
        listed = p | beam.Impulse() | ListClassFolders(root, extensions, FRACTIONS, threads=4)
        sources = listed.sources | beam.FlatMap(lambda sources: sources)
        assert_that((sources, listed.skipped, listed.dead_letters) | beam.Flatten(), equal_to(expected))
    assert gcs.list_requests > 40 // 3  # in pages of 3: listed, not handed over


def _layout(seed: int, folder_style: str, file_style: str, folders: int, per_folder: int) -> list[str]:
    """Names of `folders` class folders of `per_folder` images each, named in one of the ways
    datasets name them."""
    rng = random.Random(seed)
    folder_names = {
        "numbered": lambda f: f"class{f:04d}",
        "synset": lambda f: f"n{rng.randrange(10**8):08d}",
        "word": lambda f: "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 12))),
    }[folder_style]
    file_names = {
        "numbered": lambda folder, i: f"img{i:07d}.jpg",
        "synset": lambda folder, i: f"{folder}_{rng.randrange(10**5)}.JPEG",
        "hex": lambda folder, i: f"{rng.getrandbits(64):016x}.jpg",
    }[file_style]
    names = set()
    for folder in {folder_names(f) for f in range(folders)}:
        names.update(f"in/{folder}/{file_names(folder, i)}" for i in range(per_folder))
    return sorted(names)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.integers(0, 2**32),
    st.sampled_from(["numbered", "synset", "word"]),
    st.sampled_from(["numbered", "synset", "hex"]),
    st.integers(1, 40),
    st.integers(20_000, 50_000),
    st.sampled_from([4, 8, 16]),
)
def test_however_a_dataset_names_its_folders_and_files_its_listing_takes_a_few_requests_a_page(
    gcs, seed, folder_style, file_style, folders, objects, threads
):
    """Cuts fall where folders start, or evenly between names, so that few pieces are empty: an
    empty piece costs a request and a page's wait. Threads that would otherwise wait try cuts
    ever farther into a large folder whose end they cannot see, some of which come back empty,
    but a listing takes a few requests a page at most, however its names spread."""
    served = _layout(seed, folder_style, file_style, folders, objects // folders)
    gcs.serve(served)
    gcs.page_size, gcs.page_latency = 1000, 0.05
    gcs.reset()
    assert sum(1 for _ in storage.list_below("gs://b/in", threads=threads)) == len(served)
    pages = -(-len(served) // 1000)
    assert gcs.list_requests <= 4 * pages + 2 * threads
