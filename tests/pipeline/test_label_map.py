"""Labels a person reads as one, that the run keeps apart: each group is named in a warning."""

import unicodedata

from pipeline.label_map import (
    alike_labels_warnings,
    empty_labels_warnings,
    missing_from_split_warnings,
    new_labels_warnings,
)
from transforms.label_column import kept_ids

NFC, NFD = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")


def test_labels_differing_only_in_case_unicode_form_or_spaces_are_named_together():
    labels = ["Cat", "cat", NFC, NFD, "dog", "dog ", "ｄｏｇ", "bird"]
    assert alike_labels_warnings(labels) == [
        "labels 'Cat', 'cat' differ only in case, Unicode form or spaces: each is a class of its own; rename the "
        "folders or CSV labels to one spelling to merge them",
        "labels 'cafe\\u0301', 'caf\\xe9' differ only in case, Unicode form or spaces: each is a class of its own; "
        "rename the folders or CSV labels to one spelling to merge them",
        "labels 'dog', 'dog ', '\\uff44\\uff4f\\uff47' differ only in case, Unicode form or spaces: each is a class "
        "of its own; rename the folders or CSV labels to one spelling to merge them",
    ]


def test_distinct_labels_give_no_warning():
    assert alike_labels_warnings(["cat", "cats", "dog", "hot dog", "hotdog", "0", "O", "l", "1"]) == []


def test_a_new_version_keeps_every_id_and_puts_new_labels_after_them():
    previous = ("bird", "cat", "dog")
    assert kept_ids(previous, ("ant", "cat", "dog", "zebra", "bee")) == ("bird", "cat", "dog", "ant", "bee", "zebra")
    assert kept_ids(previous, previous) == previous


def test_labels_without_records_are_named():
    records = {"train": {"cat": 3, "dog": 0}, "validation": {"dog": 0, "emu": 1}}
    [warning] = empty_labels_warnings(("bird", "cat", "dog", "emu"), records)
    assert warning.startswith("2 label(s) of the label map have no records: 'bird', 'dog' (every source failed")
    assert empty_labels_warnings(("cat", "emu"), records) == []


def test_labels_a_refresh_added_are_named():
    labels = ("bird", "cat", "dog", "ant", "bee")
    assert new_labels_warnings(labels, 3) == [
        "2 label(s) are new since the previous version, after its 3 label(s): 'ant', 'bee'; a model trained on "
        "that version has no output for them"
    ]
    assert new_labels_warnings(labels, 5) == []
    assert new_labels_warnings(labels, 0) == []  # no previous version


def test_labels_missing_from_a_split_that_holds_others_are_named():
    records = {"train": {"cat": 5, "dog": 4, "emu": 1, "owl": 0}, "validation": {"cat": 2, "gnu": 1}, "test": {}}
    assert missing_from_split_warnings(records) == [
        "1 label(s) have records, but none in split 'train': 'gnu' (the split hash put all their sources "
        "elsewhere: 'train' cannot teach or measure them)",
        "2 label(s) have records, but none in split 'validation': 'dog', 'emu' (the split hash put all their "
        "sources elsewhere: 'validation' cannot teach or measure them)",
    ]  # 'test' holds no records at all, and 'owl' none anywhere (empty_labels_warnings names it)
    assert missing_from_split_warnings({"train": {"cat": 3}, "validation": {"cat": 1}}) == []
