"""Rows of an image CSV that cannot become records: unsupported URI schemes, duplicates and
conflicts, unknown splits, a BOM, images that do not exist."""

from transforms.outcomes import DeadLetter, Source
from transforms.sources import check_images_exist, not_utf8, parse_image_csv

FRACTIONS = (("train", 0.8), ("validation", 0.2))


def parse(lines, csv_uri="/d/labels.csv", fractions=FRACTIONS):
    return list(parse_image_csv(lines, csv_uri, "image_uri", "label", "split", fractions))


def lines_of(outcomes):
    return [int(o.source.rsplit(":", 1)[1]) for o in outcomes]


def test_http_and_https_uris_are_dead_letters_not_crashes():
    out = parse(
        [
            "split,image_uri,label\n",
            "TRAIN,http://example.com/a.jpg,cat\n",
            "TRAIN,https://example.com/b.jpg,dog\n",
            "TRAIN,img/c.jpg,cat\n",
        ]
    )
    assert [type(o) for o in out] == [DeadLetter, DeadLetter, Source]
    assert lines_of(out[:2]) == [2, 3]
    assert all(o.stage == "parse" and "unsupported URI scheme" in o.reason for o in out[:2])
    assert "'http://'" in out[0].reason and "'https://'" in out[1].reason


def test_identical_rows_are_written_once_and_the_duplicate_reported():
    out = parse(["TRAIN,img/a.jpg,cat\n", "TEST,img/b.jpg,dog\n", "train,img/a.jpg,cat\n", "TRAIN,img/a.jpg,cat\n"])
    assert out[0] == Source("/d/img/a.jpg", "img/a.jpg", "cat", "train")
    assert out[1].split == "test"
    assert [(o.source, o.stage) for o in out[2:]] == [
        ("/d/labels.csv:3", "duplicate"),
        ("/d/labels.csv:4", "duplicate"),
    ]
    assert all("duplicate row of line 1" in o.reason for o in out[2:])


def test_the_same_uri_with_another_label_or_split_is_a_conflict_and_never_a_record():
    out = parse(
        [
            "split,image_uri,label\n",
            "TRAIN,img/a.jpg,cat\n",  # 2
            "TRAIN,img/a.jpg,dog\n",  # 3: another label
            "TRAIN,img/b.jpg,cat\n",  # 4
            "VALIDATION,img/b.jpg,cat\n",  # 5: another split
            "TRAIN,img/c.jpg,cat\n",  # 6: fine
        ]
    )
    assert [type(o) for o in out] == [DeadLetter] * 4 + [Source]
    assert [o.stage for o in out[:4]] == ["conflict"] * 4
    assert "line 3" in out[0].reason and "'dog'" in out[0].reason
    assert "line 2" in out[1].reason and "'cat'" in out[1].reason
    assert "line 5" in out[2].reason and "'validation'" in out[2].reason
    assert "line 4" in out[3].reason
    assert all("none of its rows is converted" in o.reason for o in out[:4])


def test_unknown_split_values_are_dead_letters_not_new_splits():
    lines = ["HOLDOUT,img/a.jpg,cat\n", "TEST,img/b.jpg,cat\n", "unassigned,img/c.jpg,cat\n", ",img/d.jpg,cat\n"]
    out = parse(lines)
    assert isinstance(out[0], DeadLetter) and out[0].stage == "parse" and "unknown split 'HOLDOUT'" in out[0].reason
    assert [o.split for o in out[1:2]] == ["test"]
    assert all(isinstance(o, Source) and o.split in {"train", "validation"} for o in out[2:])
    # A configured split name is a split, whatever its case.
    [holdout, *_] = parse(lines, fractions=(("train", 0.9), ("holdout", 0.1)))
    assert isinstance(holdout, Source) and holdout.split == "holdout"


def test_a_bom_before_the_header_is_not_part_of_it():
    out = parse(["\ufeffsplit,image_uri,label\n", "TRAIN,img/a.jpg,cat\n"])
    assert out == [Source("/d/img/a.jpg", "img/a.jpg", "cat", "train")]
    # Headerless: the BOM is not part of the first split value either.
    out = parse(["\ufeffTEST,img/a.jpg,cat\n"])
    assert out == [Source("/d/img/a.jpg", "img/a.jpg", "cat", "test")]


def test_images_that_do_not_exist_are_read_dead_letters(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"x")
    (tmp_path / ".hidden.jpg").write_bytes(b"x")  # a glob listing leaves it out
    sources = [Source(str(tmp_path / name), name, "cat", "train") for name in ("a.jpg", ".hidden.jpg", "gone.jpg")]
    out = list(check_images_exist(str(tmp_path), sources))
    assert out[:2] == sources[:2]
    assert out[2] == DeadLetter(str(tmp_path / "gone.jpg"), "read", f"file not found: {tmp_path / 'gone.jpg'}")


def test_a_row_with_more_fields_than_its_layout_is_a_dead_letter_not_a_first_label():
    """AutoML's multi-label rows (`[set,]path,label1,label2,...`) and bounding-box rows would lose
    all but their first label; empty fields at a row's end (spreadsheet exports) are no loss."""
    out = parse(
        [
            "TRAIN,img/a.jpg,cat\n",  # 1: the layout, split,image_uri,label
            "TRAIN,img/b.jpg,cat,dog\n",  # 2: multi-label
            "TEST,img/c.jpg,cat,0.1,0.2,,,0.5,0.6,,\n",  # 3: a bounding box
            "TRAIN,img/d.jpg,dog,,\n",  # 4: fine
            "img/e.jpg,dog\n",  # 5: too few for the layout
        ]
    )
    assert [type(o) for o in out] == [Source, DeadLetter, DeadLetter, Source, DeadLetter]
    assert [o.reason for o in (out[1], out[2], out[4])] == [
        "4 field(s) where rows have split,image_uri,label, as in the first row (no header) "
        "(a multi-label or bounding-box row? each image gets one label)",
        "9 field(s) where rows have split,image_uri,label, as in the first row (no header) "
        "(a multi-label or bounding-box row? each image gets one label)",
        "2 field(s) where rows have split,image_uri,label, as in the first row (no header)",
    ]
    padded = parse(["img/a.jpg,cat,,\n", "img/b.jpg,dog,\n", "img/c.jpg,dog,x\n"])  # a padded first row: uri,label
    assert [type(o) for o in padded] == [Source, Source, DeadLetter]
    assert padded[2].reason.startswith("3 field(s) where rows have image_uri,label, as in the first row")
    named = parse(["image_uri,label,notes\n", "img/a.jpg,cat\n", "img/b.jpg,cat,ok,dog\n", "img/c.jpg\n"])
    assert [type(o) for o in named] == [Source, DeadLetter, DeadLetter]
    assert named[1].reason.startswith("4 field(s) where rows have the 3 of the header (a multi-label")
    assert named[2].reason == "1 field(s) where rows have the 3 of the header"


def test_one_image_written_two_ways_is_one_source():
    """`./img/a.jpg`, `img//a.jpg` and the absolute path name one file: two records of it would
    weigh it twice, and put it in both splits when the rows disagree."""
    spellings = ["img/a.jpg", "./img/a.jpg", "img//a.jpg", "/d/img/a.jpg", "other/../img/a.jpg"]
    out = parse(["split,image_uri,label\n"] + [f"TRAIN,{uri},cat\n" for uri in spellings])
    assert out[0] == Source("/d/img/a.jpg", "img/a.jpg", "cat", "train")
    assert [(o.stage, o.reason) for o in out[1:]] == [
        ("duplicate", f"duplicate row of line 2 ({uri})") for uri in spellings[1:]
    ]
    on_gcs = parse(["./img/a.jpg,cat\n", "gs://b/d//img/a.jpg,cat\n"], csv_uri="gs://b/d/labels.csv")
    assert [o.uri for o in on_gcs] == ["gs://b/d/img/a.jpg", "gs://b/d//img/a.jpg"]  # objects are named as written


def test_only_bytes_that_were_not_utf8_make_a_row_invalid():
    read = b"caf\xe9,ok".decode("utf-8", "surrogateescape").split(",")  # as storage.open_text reads it
    assert not_utf8(read)
    assert not not_utf8(["café", "日本", "ok", ""]) and not not_utf8([])
