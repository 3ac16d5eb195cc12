"""transforms.folder_layout: class folders or split folders, decided from the folder names below an
input, for every mix of names (generated), and transforms.sources.ClassFolders reading each layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.folder_layout import (
    AUTO,
    CLASS_FOLDERS,
    SPLIT_FOLDERS,
    FolderLayout,
    LayoutError,
    detect_layout,
)
from transforms.outcomes import DeadLetter, Source
from transforms.sources import ClassFolders
from transforms.splits import SPLIT_NAMES

EXTENSIONS = (".jpg", ".png")
FRACTIONS = (("train", 0.8), ("validation", 0.2))


def in_any_case(name: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(name), max_size=len(name)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(name, upper, strict=True))
    )


split_folder = st.sampled_from(sorted(SPLIT_NAMES)).flatmap(in_any_case)
# Class names as people name them, none of them a split's name in any case.
class_folder = st.one_of(
    st.sampled_from(["cat", "dog", "n01440764", "0", "1", "Tench", "café", "trains", "tests", "validate", "x y"]),
    st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1, max_size=12),
).filter(lambda name: name.lower() not in SPLIT_NAMES and not name.startswith("."))
hidden_folder = st.sampled_from([".git", ".ipynb_checkpoints", ".Train", ".thumbnails"])


@given(st.lists(class_folder, min_size=0, max_size=6, unique=True), st.lists(hidden_folder, unique=True))
def test_folders_none_of_which_names_a_split_are_class_folders(classes, hidden):
    assert detect_layout(classes + hidden) == FolderLayout()
    assert detect_layout(classes + hidden, CLASS_FOLDERS) == FolderLayout()


one_per_split = st.lists(split_folder, min_size=1, max_size=3, unique_by=lambda n: SPLIT_NAMES[n.lower()])


@given(one_per_split, st.lists(hidden_folder))
def test_folders_that_all_name_splits_are_split_folders_each_holding_its_split(splits, hidden):
    for setting in (AUTO, SPLIT_FOLDERS):
        layout = detect_layout(splits + hidden, setting)
        assert dict(layout.split_folders) == {name: SPLIT_NAMES[name.lower()] for name in splits}
        assert layout.name == SPLIT_FOLDERS
        assert set(layout.splits) == {SPLIT_NAMES[name.lower()] for name in splits}
        assert list(layout.splits) == sorted(layout.splits, key=["train", "validation", "test"].index)
    assert detect_layout(splits + hidden, CLASS_FOLDERS) == FolderLayout()  # the setting overrides


@given(one_per_split, st.lists(class_folder, min_size=1, max_size=3, unique=True))
def test_a_mix_of_split_and_class_folders_is_refused_in_one_line_naming_the_setting(splits, classes):
    with pytest.raises(LayoutError) as refused:
        detect_layout(splits + classes)
    message = str(refused.value)
    assert "\n" not in message and "mix split folders" in message and "--layout class_folders" in message
    assert all(f"{name}/" in message for name in splits[:5])
    with pytest.raises(LayoutError, match="not named as a split"):
        detect_layout(splits + classes, SPLIT_FOLDERS)
    assert detect_layout(splits + classes, CLASS_FOLDERS) == FolderLayout()


@given(
    st.sampled_from(["train", "validation", "test"]).flatmap(
        lambda split: st.lists(
            st.sampled_from([n for n, s in SPLIT_NAMES.items() if s == split]).flatmap(in_any_case),
            min_size=2,
            max_size=3,
            unique=True,
        )
    )
)
def test_two_folders_naming_one_split_are_refused(names):
    with pytest.raises(LayoutError, match="all name split"):
        detect_layout(names)


def test_split_folders_needs_a_split_folder():
    for folders in ([], [".git"]):
        with pytest.raises(LayoutError, match="no folder is named as a split"):
            detect_layout(folders, SPLIT_FOLDERS)


def test_a_folder_name_that_is_not_printable_is_quoted_in_the_refusal():
    with pytest.raises(LayoutError) as refused:
        detect_layout(["train", "cat\x1b[2J"])
    assert "\x1b" not in str(refused.value) and "'cat\\x1b[2J'/" in str(refused.value)


SPLITS = FolderLayout((("Train", "train"), ("val", "validation")))
path_part = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters="-_ "), min_size=1, max_size=8)


@given(st.sampled_from(["Train", "val"]), path_part, st.lists(path_part, max_size=2), path_part)
def test_split_folders_give_the_split_and_the_folder_below_the_label(folder, label, below, name):
    key = "/".join([folder, label, *below, f"{name}.jpg"])
    outcome = ClassFolders("/d", EXTENSIONS, FRACTIONS, SPLITS).file(f"/d/{key}")
    assert outcome == Source(f"/d/{key}", key, label, dict(SPLITS.split_folders)[folder])


@given(path_part, path_part)
def test_class_folders_label_by_the_first_folder_whatever_its_name(label, name):
    key = f"train/{label}/{name}.jpg"
    outcome = ClassFolders("/d", EXTENSIONS, FRACTIONS).file(f"/d/{key}")
    assert isinstance(outcome, Source) and outcome.label == "train"


def test_an_image_not_in_a_class_folder_of_a_split_folder_is_a_dead_letter():
    classify = ClassFolders("gs://b/d", EXTENSIONS, FRACTIONS, SPLITS).file
    assert classify("gs://b/d/val/1.jpg") == DeadLetter(
        "gs://b/d/val/1.jpg", "label", "image is directly in split folder val/, not in a class sub-folder val/<label>/"
    )
    assert classify("gs://b/d/1.jpg").reason.endswith("not in a class sub-folder <split>/<label>/")
    late = classify("gs://b/d/test/cat/1.jpg")  # a folder made after the layout was decided
    assert isinstance(late, DeadLetter) and "not one of the split folders Train, val" in late.reason


def test_the_layout_is_described_for_the_manifest():
    assert FolderLayout().described() == {"folders": "class_folders"}
    assert SPLITS.described() == {"folders": "split_folders", "split_folders": {"Train": "train", "val": "validation"}}


@given(class_folder, st.lists(split_folder, min_size=1, max_size=3, unique_by=lambda n: SPLIT_NAMES[n.lower()]))
def test_an_input_whose_one_folder_holds_split_folders_is_refused_naming_that_folder(folder, below):
    """An archive unpacked into a folder of its own: read as class folders, one class."""
    with pytest.raises(LayoutError) as refused:
        detect_layout([folder, ".git"], AUTO, lambda name: below + [".DS_Store"], "/data")
    message = str(refused.value)
    assert "holds split folders" in message and f"--input /data/{folder}" in message
    assert detect_layout([folder], CLASS_FOLDERS, lambda name: below) == FolderLayout()


@given(class_folder, st.lists(class_folder, min_size=2, max_size=4, unique=True))
def test_an_input_whose_one_folder_holds_class_folders_is_refused_naming_that_folder(folder, below):
    with pytest.raises(LayoutError, match="which would all be one class"):
        detect_layout([folder], AUTO, lambda name: below, "/data")


@given(class_folder, st.lists(class_folder, max_size=1))
def test_one_class_folder_holding_files_or_one_folder_is_one_class(folder, below):
    assert detect_layout([folder], AUTO, lambda name: below) == FolderLayout()
