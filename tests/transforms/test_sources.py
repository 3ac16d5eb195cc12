import io

import apache_beam as beam
import pytest

from tests.image_csv_outcomes import parse_image_csv
from transforms.outcomes import DEAD_LETTERS, DeadLetter, Skipped, Source
from transforms.sources import SOURCES_PER_LIST, classify_folder_entry, extension_of, in_lists

EXTENSIONS = frozenset({".jpg", ".jpeg", ".png"})
FRACTIONS = (("train", 0.8), ("validation", 0.2))


@pytest.mark.parametrize(
    "path, expected", [("a/b.JPG", ".jpg"), ("a/.DS_Store", ""), ("a/README", ""), ("x.tar.gz", ".gz")]
)
def test_extension_of(path, expected):
    assert extension_of(path) == expected


def test_classify_folder_entries():
    image = classify_folder_entry("gs://b/root", "gs://b/root/cat/sub/1.JPEG", EXTENSIONS, FRACTIONS)
    assert isinstance(image, Source) and image.label == "cat" and image.key == "cat/sub/1.JPEG"
    assert classify_folder_entry("/d", "/d/cat/.DS_Store", EXTENSIONS, FRACTIONS) == Skipped(
        "/d/cat/.DS_Store", "(hidden)"
    )
    assert classify_folder_entry("/d", "/d/cat/notes.txt", EXTENSIONS, FRACTIONS) == Skipped("/d/cat/notes.txt", ".txt")
    stray = classify_folder_entry("/d", "/d/stray.jpg", EXTENSIONS, FRACTIONS)
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
        assert classify_folder_entry(root, f"{root}/{key}", EXTENSIONS, FRACTIONS) == Skipped(
            f"{root}/{key}", "(hidden)"
        )


def test_a_hidden_input_folder_is_read_like_any_other():
    image = classify_folder_entry("/home/me/.cache/data", "/home/me/.cache/data/cat/1.jpg", EXTENSIONS, FRACTIONS)
    assert isinstance(image, Source) and image.label == "cat"
    image = classify_folder_entry("/d", "/d/cat/1.x.jpg", EXTENSIONS, FRACTIONS)
    assert isinstance(image, Source) and image.key == "cat/1.x.jpg"


def test_split_is_the_same_wherever_the_dataset_lives():
    a = classify_folder_entry("/local/data", "/local/data/cat/1.jpg", EXTENSIONS, FRACTIONS)
    b = classify_folder_entry("gs://bucket/x", "gs://bucket/x/cat/1.jpg", EXTENSIONS, FRACTIONS)
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
