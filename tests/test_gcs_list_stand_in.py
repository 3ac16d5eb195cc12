"""The GCS listing stand-in answers google-cloud-storage's client as GCS would: pages of at most
1,000 entries that together hold every object once, prefixes with a delimiter, name ranges
(startOffset, endOffset) for any names, metadata and bytes consistent with the listing, and
counters that see concurrent list requests."""

from __future__ import annotations

import threading

import pytest
from google.api_core.exceptions import BadRequest
from google.cloud import storage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gcs_list_stand_in import PAGE_SIZE, ListStandIn


def client(stand_in: ListStandIn, monkeypatch) -> storage.Client:
    """A client configured as the pipeline's is: from STORAGE_EMULATOR_HOST in the environment."""
    for name, value in stand_in.env.items():
        monkeypatch.setenv(name, value)
    return storage.Client()


def test_paging_without_delimiter_gives_every_object_once_in_pages_of_1000(monkeypatch):
    with ListStandIn(2_500, 3) as gcs:
        names = [blob.name for blob in client(gcs, monkeypatch).list_blobs("bench", prefix="images/")]
        assert names == [gcs.name(i) for i in range(2_500)]
        assert len(set(names)) == 2_500
        assert gcs.list_requests == 3  # 1,000 + 1,000 + 500
        assert names[0] == "images/class0000/img0000000.jpg"
        assert {name.split("/")[1] for name in names} == {"class0000", "class0001", "class0002"}


def test_a_prefix_lists_only_its_folder_and_max_results_pages_smaller(monkeypatch):
    with ListStandIn(2_500, 3) as gcs:
        folder = gcs.name(1_000).rsplit("/", 1)[0] + "/"
        blobs = client(gcs, monkeypatch).list_blobs("bench", prefix=folder, page_size=300)
        names = [blob.name for blob in blobs]
        assert names == [gcs.name(i) for i in range(2_500) if gcs.name(i).startswith(folder)]
        assert len(names) == 833
        assert gcs.list_requests == 3  # 300 + 300 + 233


def test_delimiter_rolls_folders_into_prefixes_listed_once_across_pages(monkeypatch):
    with ListStandIn(3_000, 1_500) as gcs:
        gcs_client = client(gcs, monkeypatch)
        listing = gcs_client.list_blobs("bench", prefix="images/", delimiter="/")
        assert list(listing) == []
        assert listing.prefixes == {f"images/class{f:04d}/" for f in range(1_500)}
        assert gcs.list_requests == 2  # 1,000 prefixes, then 500
        inside = gcs_client.list_blobs("bench", prefix="images/class0007/", delimiter="/")
        assert [blob.name for blob in inside] == [gcs.name(14), gcs.name(15)]
        assert inside.prefixes == set()


def test_metadata_and_bytes_agree_with_the_listing(monkeypatch):
    with ListStandIn(1_200, 2) as gcs:
        gcs_client = client(gcs, monkeypatch)
        listed = {blob.name: blob for blob in gcs_client.list_blobs("bench")}
        bucket = gcs_client.bucket("bench")
        blob = bucket.get_blob(gcs.name(1_111))
        assert (blob.size, blob.updated, blob.generation) == (
            listed[blob.name].size,
            listed[blob.name].updated,
            listed[blob.name].generation,
        )
        assert (blob.size, blob.updated) == (gcs.size(1_111), gcs.updated(1_111))
        assert blob.download_as_bytes() == gcs.content(1_111)
        assert len(gcs.content(1_111)) == gcs.size(1_111)
        assert blob.download_as_bytes(start=5, end=9) == gcs.content(1_111)[5:10]
        assert bucket.get_blob("images/class0000/nothing.jpg") is None
        assert bucket.exists()
        assert not gcs_client.bucket("another").exists()


def test_a_changed_object_lists_and_stats_anew_and_no_other_does(monkeypatch):
    with ListStandIn(1_500, 3) as gcs:
        gcs_client = client(gcs, monkeypatch)

        def listing():
            return {b.name: (b.size, b.updated, b.generation) for b in gcs_client.list_blobs("bench")}

        before = listing()
        gcs.change(42)
        after = listing()
        assert {name for name in before if before[name] != after[name]} == {gcs.name(42)}
        assert all(old != new for old, new in zip(before[gcs.name(42)], after[gcs.name(42)], strict=True))
        assert gcs_client.bucket("bench").get_blob(gcs.name(42)).size == after[gcs.name(42)][0]


def test_counters_see_list_requests_in_flight_at_once(monkeypatch):
    with ListStandIn(PAGE_SIZE * 4, 4) as gcs:
        clients = [client(gcs, monkeypatch) for _ in range(4)]  # a client per thread, as the pipeline has
        for each in clients:  # connected and set up before the pages are held back
            assert not list(each.list_blobs("bench", prefix="nothing/"))
        gcs.reset()
        gcs.page_latency = 3.0  # long enough that a loaded machine starts all four before one ends
        together = threading.Barrier(len(clients))
        listed = [0] * len(clients)

        def list_folder(number: int) -> None:
            together.wait()
            blobs = clients[number].list_blobs("bench", prefix=f"images/class{number:04d}/")
            listed[number] = sum(1 for _ in blobs)

        threads = [threading.Thread(target=list_folder, args=(n,)) for n in range(len(clients))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert listed == [PAGE_SIZE] * 4
        assert (gcs.list_requests, gcs.max_lists_in_flight) == (4, 4)

        gcs.reset()
        gcs.page_latency = 0.0
        assert sum(1 for _ in clients[0].list_blobs("bench", page_size=2 * PAGE_SIZE)) == 4 * PAGE_SIZE
        assert (gcs.list_requests, gcs.max_lists_in_flight) == (4, 1)  # maxResults is capped at 1,000


def test_a_listing_parameter_it_does_not_implement_is_refused(monkeypatch):
    with ListStandIn(10, 1) as gcs:
        with pytest.raises(BadRequest, match="matchGlob"):
            list(client(gcs, monkeypatch).list_blobs("bench", match_glob="**.jpg"))


def test_offsets_bound_a_listing_start_inclusive_end_exclusive_across_pages(monkeypatch):
    with ListStandIn(2_500, 1) as gcs:
        blobs = client(gcs, monkeypatch).list_blobs(
            "bench", prefix="images/", start_offset=gcs.name(700), end_offset=gcs.name(1_950), page_size=400
        )
        assert [blob.name for blob in blobs] == [gcs.name(i) for i in range(700, 1_950)]
        assert gcs.list_requests == 4  # 400 + 400 + 400 + 50
        assert not list(client(gcs, monkeypatch).list_blobs("bench", start_offset="z"))
        assert not list(client(gcs, monkeypatch).list_blobs("bench", end_offset=gcs.name(0)))


# Names of a few folders, some names prefixes of others, unicode and long shared starts included.
_PART = st.text(st.sampled_from("ab/ü€\U0001f600.0~"), min_size=1, max_size=4)
_NAMES = st.lists(st.builds("".join, st.lists(_PART, min_size=1, max_size=4)), max_size=40, unique=True).map(sorted)


@pytest.fixture(scope="module")
def listing_stand_in():
    with ListStandIn(names=[]) as gcs:
        yield gcs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_NAMES, st.text(st.sampled_from("ab/ü"), max_size=2), st.data())
def test_any_names_list_as_gcs_lists_them_with_offsets_delimiter_and_pages(
    listing_stand_in, monkeypatch, names, prefix, data
):
    gcs = listing_stand_in
    gcs.serve(names)
    start = data.draw(st.sampled_from(["", *names, "a", "b/ü"]))
    end = data.draw(st.sampled_from([None, *names, "b", "\U0001f600"]))
    delimiter = data.draw(st.sampled_from([None, "/"]))
    pages = client(gcs, monkeypatch).list_blobs(
        "bench", prefix=prefix, delimiter=delimiter, start_offset=start or None, end_offset=end, page_size=3
    )
    listed = [blob.name for blob in pages]
    wanted = [n for n in names if n.startswith(prefix) and start <= n and (end is None or n < end)]
    rolled_up = [n for n in wanted if delimiter and "/" in n[len(prefix) :]]
    assert listed == [n for n in wanted if n not in rolled_up]
    assert pages.prefixes == {n[: n.index("/", len(prefix)) + 1] for n in rolled_up}
