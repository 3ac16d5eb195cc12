import io
import os
import posixpath

import apache_beam as beam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.image_csv_outcomes import parse_image_csv
from transforms.outcomes import DEAD_LETTERS, DeadLetter, Skipped, Source
from transforms.sources import SOURCES_PER_LIST, ClassFolders, extension_of, in_lists, is_hidden, printable_path
from transforms.splits import assign_split

EXTENSIONS = frozenset({".jpg", ".jpeg", ".png"})
FRACTIONS = (("train", 0.8), ("validation", 0.2))


@pytest.mark.parametrize(
    "path, expected", [("a/b.JPG", ".jpg"), ("a/.DS_Store", ""), ("a/README", ""), ("x.tar.gz", ".gz")]
)
def test_extension_of(path, expected):
    assert extension_of(path) == expected


def test_classify_folder_entries():
    image = ClassFolders("gs://b/root", EXTENSIONS, FRACTIONS).file("gs://b/root/cat/sub/1.JPEG")
    assert isinstance(image, Source) and image.label == "cat" and image.key == "cat/sub/1.JPEG"
    assert ClassFolders("/d", EXTENSIONS, FRACTIONS).file("/d/cat/.DS_Store") == Skipped("/d/cat/.DS_Store", "(hidden)")
    assert ClassFolders("/d", EXTENSIONS, FRACTIONS).file("/d/cat/notes.txt") == Skipped("/d/cat/notes.txt", ".txt")
    stray = ClassFolders("/d", EXTENSIONS, FRACTIONS).file("/d/stray.jpg")
    assert isinstance(stray, DeadLetter) and stray.stage == "label"


@pytest.mark.parametrize(
    "key",
    [
        ".ipynb_checkpoints/1-checkpoint.jpg",  # would be a class of its own
        ".1.jpg",  # directly in the input, hidden: not a label dead letter
        "cat/._1.jpg",  # a macOS resource fork, not a JPEG
        "cat/.thumbnails/1.jpg",  # a copy, not another record of the class
        "__MACOSX/cat/._1.jpg",
    ],
)
def test_hidden_files_and_everything_in_hidden_folders_are_skipped(key):
    for root in ("/d", "gs://b/root"):
        assert ClassFolders(root, EXTENSIONS, FRACTIONS).file(f"{root}/{key}") == Skipped(f"{root}/{key}", "(hidden)")


def test_a_hidden_input_folder_is_read_like_any_other():
    image = ClassFolders("/home/me/.cache/data", EXTENSIONS, FRACTIONS).file("/home/me/.cache/data/cat/1.jpg")
    assert isinstance(image, Source) and image.label == "cat"
    image = ClassFolders("/d", EXTENSIONS, FRACTIONS).file("/d/cat/1.x.jpg")
    assert isinstance(image, Source) and image.key == "cat/1.x.jpg"


def test_split_is_the_same_wherever_the_dataset_lives():
    a = ClassFolders("/local/data", EXTENSIONS, FRACTIONS).file("/local/data/cat/1.jpg")
    b = ClassFolders("gs://bucket/x", EXTENSIONS, FRACTIONS).file("gs://bucket/x/cat/1.jpg")
    assert a.split == b.split and a.key == b.key


def test_parse_image_csv_with_header(tmp_path):
    lines = [
        "split,image_uri,label\n",
        "TRAIN,img/a.jpg,cat\n",
        "VALIDATION,gs://b/x.png,dog\n",
        "UNASSIGNED,img/c.jpg,cat\n",
        "\n",
        "TEST,img/d.jpg,\n",
        "WEIRD-SPLIT,img/e.jpg,cat\n",
        "TRAIN\n",
    ]
    text = io.StringIO("".join(lines), newline="")
    out = list(parse_image_csv(text, str(tmp_path / "labels.csv"), "image_uri", "label", "split", FRACTIONS))
    sources = [o for o in out if isinstance(o, Source)]
    errors = [o for o in out if isinstance(o, DeadLetter)]
    assert [(s.uri, s.label, s.split) for s in sources[:2]] == [
        (str(tmp_path / "img/a.jpg"), "cat", "train"),
        ("gs://b/x.png", "dog", "validation"),
    ]
    assert sources[2].split in {"train", "validation"} and sources[2].key == "img/c.jpg"
    assert [(e.source.rsplit(":", 1)[1], e.stage) for e in errors] == [("6", "parse"), ("7", "parse"), ("8", "parse")]
    assert "no label" in errors[0].reason


def test_parse_headerless_automl_csv():
    out = list(
        parse_image_csv(
            io.StringIO("TEST,gs://b/a.jpg,cat\ngs://b/b.jpg,dog\n", newline=""),
            "gs://b/l.csv",
            "image_uri",
            "label",
            "split",
            FRACTIONS,
        )
    )
    assert out[0] == Source("gs://b/a.jpg", "gs://b/a.jpg", "cat", "test")
    assert isinstance(out[1], DeadLetter)  # the layout is fixed by the first row (3 columns)


def test_sources_travel_in_lists_and_everything_else_as_it_comes():
    sources = [Source(f"/in/a/{i}.jpg", f"a/{i}.jpg", "a", "train") for i in range(SOURCES_PER_LIST + 5)]
    letter = beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter("/in/x.jpg", "label", "no class folder"))
    outputs = list(in_lists([*sources[:3], letter, *sources[3:]]))
    assert outputs[0] is letter  # not held back until a list is full
    assert outputs[1:] == [sources[:SOURCES_PER_LIST], sources[SOURCES_PER_LIST:]]


def _paths():
    """Paths of names with dots and slashes in every place, and names that are not UTF-8 (carried
    as surrogate escapes, as os.listdir gives them)."""
    text = st.text(st.sampled_from("./aJ.é"), max_size=12)
    return st.one_of(text, st.binary(max_size=12).map(os.fsdecode), st.tuples(text, text).map("/".join))


@given(_paths())
def test_extension_of_finds_what_splitext_finds_in_the_base_name(path):
    assert extension_of(path) == posixpath.splitext(posixpath.basename(path))[1].lower()


@given(_paths())
def test_printable_path_escapes_exactly_the_bytes_that_are_not_utf8(path):
    assert printable_path(path) == path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@given(st.lists(st.text(st.sampled_from("ab.é"), max_size=4), min_size=1, max_size=3).map("/".join))
def test_an_image_below_a_class_folder_is_labelled_by_it_and_split_by_its_key(key):
    key += ".jpg"
    outcome = ClassFolders("gs://b/root", EXTENSIONS, FRACTIONS).file(f"gs://b/root/{key}")
    assert isinstance(outcome, Source) == (not is_hidden(key) and "/" in key)
    if isinstance(outcome, Source):
        assert outcome == Source(f"gs://b/root/{key}", key, key.split("/", 1)[0], assign_split(key, FRACTIONS))
