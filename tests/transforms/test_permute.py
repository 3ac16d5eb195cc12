import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from transforms.permute import LIST_SIZE, PermuteOrder, _ToRandomBuckets


def _order_checker(original):
    def check(actual):
        assert sorted(actual) == sorted(original), "elements lost or duplicated"
        # Beam's Reshuffle keeps listing order on the DirectRunner; a permutation must not. The
        # chance that a random permutation of 1000 leaves > 100 elements in place is negligible.
        in_place = sum(a == b for a, b in zip(actual, original, strict=True))
        assert in_place < 100, f"{in_place} of {len(original)} elements kept their position"

    return check


def test_permutes_order_on_the_direct_runner():
    original = list(range(1000))
    with TestPipeline() as p:
        out = p | beam.Create(original, reshuffle=False) | PermuteOrder(num_buckets=3) | beam.combiners.ToList()
        assert_that(out, lambda lists: _order_checker(original)(lists[0]))


def test_keeps_every_element_with_many_buckets():
    with TestPipeline() as p:
        out = p | beam.Create(range(500)) | PermuteOrder(num_buckets=64)
        assert_that(out, equal_to(list(range(500))))


def test_batches_hold_every_element_once_in_permuted_order():
    original = list(range(1000))
    with TestPipeline() as p:
        batches = p | beam.Create(original, reshuffle=False) | PermuteOrder(num_buckets=3, batch_size=32)

        def check(actual):
            assert all(1 <= len(batch) <= 32 for batch in actual)
            assert sum(len(batch) < 32 for batch in actual) <= 3  # only a bucket's last batch is short
            _order_checker(original)([x for batch in actual for x in batch])

        assert_that(batches, check)


def test_elements_travel_to_their_buckets_in_lists_of_up_to_list_size():
    """What the shuffle moves: lists, each element in exactly one."""
    to_buckets = _ToRandomBuckets(num_buckets=4, lists=False)
    to_buckets.setup()
    to_buckets.start_bundle()
    sent = [kv for element in range(1000) for kv in to_buckets.process(element)]
    sent += [windowed.value for windowed in to_buckets.finish_bundle()]
    assert all(1 <= len(elements) <= LIST_SIZE and 0 <= bucket < 4 for bucket, elements in sent)
    assert sorted(element for _, elements in sent for element in elements) == list(range(1000))
    assert len(sent) <= 1000 // LIST_SIZE + 4  # full lists, and at most one short one per bucket


def test_lists_of_elements_are_permuted_as_their_elements():
    """A listing's Sources arrive in lists (transforms.sources.in_lists); the lists' order and
    make-up must not survive the permutation."""
    original = list(range(1000))
    chunks = [original[i : i + 64] for i in range(0, 1000, 64)]
    with TestPipeline() as p:
        out = (
            p | beam.Create(chunks, reshuffle=False) | PermuteOrder(num_buckets=3, lists=True) | beam.combiners.ToList()
        )
        assert_that(out, lambda lists: _order_checker(original)(lists[0]))
