"""Groups of sources with the same bytes, and what the run says of them."""

from __future__ import annotations

import itertools

from transforms.outcomes import OutcomeSummary
from transforms.same_content import (
    IN_SPLITS,
    REPEATED,
    UNDER_LABELS,
    Copy,
    SameContent,
    SameContentSummary,
    content_digest,
    groups_in,
    same_content,
)


def group(*copies: tuple[str, str, str]) -> SameContent:
    [found] = same_content(content_digest(repr(sorted(copies)).encode()), [Copy(*c) for c in copies])
    return found


def test_the_digest_is_xxhsums_xxh128():
    assert content_digest(b"").hex() == "99aa06d3014798d86001c324468d497f"  # xxHash's published test vector


def test_one_source_is_no_group_and_copies_are_sorted():
    assert same_content(b"d", [Copy("a", "train", "cat")]) == []
    [found] = same_content(b"d", [Copy("b", "train", "cat"), Copy("a", "train", "cat")])
    assert [c.source for c in found.copies] == ["a", "b"]


def test_groups_are_gathered_across_batches():
    x1, y1, x0 = Copy("x1", "train", "cat"), Copy("y1", "train", "cat"), Copy("x0", "train", "dog")
    copies = [(b"x", x1), (b"y", y1), (b"x", x0)]
    found = list(groups_in([copies[:1], [], copies[1:]]))
    assert found == [SameContent(b"x", (x0, x1))]


def test_a_group_is_what_its_copies_differ_in():
    assert group(("a", "train", "cat"), ("b", "train", "cat")).kinds() == (REPEATED,)
    assert group(("a", "train", "cat"), ("b", "validation", "cat")).kinds() == (IN_SPLITS,)
    assert group(("a", "train", "cat"), ("b", "train", "dog")).kinds() == (UNDER_LABELS,)
    assert group(("a", "train", "cat"), ("b", "validation", "dog")).kinds() == (IN_SPLITS, UNDER_LABELS)


GROUPS = [
    group(("z/1.jpg", "train", "cat"), ("z/2.jpg", "train", "cat"), ("z/3.jpg", "train", "cat")),
    group(("b/1.jpg", "train", "cat"), ("b/2.jpg", "validation", "cat")),
    group(("c/1.jpg", "train", "cat"), ("c/2.jpg", "train", "cat"), ("c/3.jpg", "validation", "cat")),
    group(("d/1.jpg", "validation", "cat"), ("d/2.jpg", "validation", "dog")),
    group(("a/1.jpg", "train", "cat"), ("a/2.jpg", "train", "cat")),
]


def summary_of(groups) -> SameContentSummary:
    summary = SameContentSummary()
    for g in groups:
        summary.add(g)
    return summary


def test_counts_and_examples_do_not_depend_on_order_or_merging():
    whole = summary_of(GROUPS)
    assert whole.groups == {REPEATED: 2, IN_SPLITS: 2, UNDER_LABELS: 1}
    assert whole.sources == {REPEATED: 5, IN_SPLITS: 5, UNDER_LABELS: 2}
    for order in itertools.permutations(GROUPS):
        for cut in range(len(order) + 1):
            merged = summary_of(order[:cut])
            merged.merge(summary_of(order[cut:]))
            assert merged == whole


def test_the_warnings_name_two_copies_that_differ_and_the_digest():
    repeated, splits, labels = GROUPS[4], GROUPS[1], GROUPS[3]
    assert summary_of(GROUPS).warnings() == [
        "2 image(s) are stored in more than one split: evaluation sees training images, and its metrics "
        "overstate (5 sources in all; for example b/1.jpg (split 'train') and b/2.jpg (split 'validation'), "
        f"xxh128 {splits.digest.hex()})",
        "1 image(s) are stored under more than one label (2 sources in all; for example d/1.jpg (label 'cat') "
        f"and d/2.jpg (label 'dog'), xxh128 {labels.digest.hex()})",
        "2 image(s) are stored more than once in one split under one label: each copy counts as another image "
        f"(5 sources in all; for example a/1.jpg and a/2.jpg, xxh128 {repeated.digest.hex()})",
    ]
    # In a group of three, the example's second copy is the first that differs from the first.
    assert "c/3.jpg (split 'validation')" in summary_of([GROUPS[2]]).warnings()[0]


def test_the_run_summary_carries_the_groups_through_its_merges():
    parts = [OutcomeSummary() for _ in range(2)]
    for i, g in enumerate(GROUPS):
        parts[i % 2].add(g)
    merged = OutcomeSummary()
    for part in parts:
        merged.merge(part)
    assert merged.warnings() == summary_of(GROUPS).warnings()
    assert OutcomeSummary().warnings() == []
