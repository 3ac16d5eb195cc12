"""Rows of an image CSV that cannot become records: unsupported URI schemes, duplicates and
conflicts, unknown splits, a BOM, images that do not exist, images outside the CSV's folder and
its roots (checked on generated paths)."""

import io
import os
import posixpath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import storage
from pipeline.config import ConfigError, load_config
from tests.image_csv_outcomes import parse_image_csv
from transforms.csv_records import CSV_DELIMITER_LIMIT
from transforms.outcomes import DeadLetter, Source
from transforms.sources import CsvRow, Roots, check_images_exist, not_text, resolve_duplicates
from transforms.splits import assign_split

FRACTIONS = (("train", 0.8), ("validation", 0.2))
NO_ROOTS = Roots()


def parse(lines, csv_uri="/d/labels.csv", fractions=FRACTIONS, roots=NO_ROOTS):
    text = io.StringIO("".join(lines), newline="")  # as storage.open_text opens the CSV
    return list(parse_image_csv(text, csv_uri, "image_uri", "label", "split", fractions, roots))


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


class Watched(str):
    """A label or split that counts how often resolve_duplicates compares it, or looks at its row:
    the work it does, each row's its own copy (so that no comparison is skipped as identity)."""

    work = 0

    def __eq__(self, other):
        Watched.work += 1
        return str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


class WatchedRow:
    """A CsvRow that counts each look at its Source."""

    def __init__(self, row: CsvRow):
        self.where, self.line, self._source = row.where, row.line, row.source

    @property
    def source(self) -> Source:
        Watched.work += 1
        return self._source


def rows_of_one_image(labels: list[str]) -> list[CsvRow]:
    return [
        CsvRow(f"/d/labels.csv:{line}", line, Source("/d/img/a.jpg", "img/a.jpg", Watched(label), Watched("train")))
        for line, label in enumerate(labels, 1)
    ]


@pytest.mark.parametrize(
    "labels",
    [
        ["cat", "dog"] * 3000,  # each row's others are near it
        ["cat"] * 3000 + ["dog"] * 3000,  # a label's others come after all its own rows
        [f"label {i}" for i in range(6000)],  # every row a label of its own
        ["cat"] * 6000,  # duplicates
    ],
    ids=["alternating", "in two runs", "all different", "all the same"],
)
def test_rows_of_one_image_are_resolved_in_work_proportional_to_them(labels):
    """24,000 rows of one image with two labels took minutes when each row's dead letter looked at
    every other row: the work here is counted, not timed (comparisons of labels and splits, looks
    at a row), and stays a few dozen a row at most, where looking at every other row is thousands."""
    rows = [WatchedRow(row) for row in rows_of_one_image(labels)]
    Watched.work = 0
    outcomes = resolve_duplicates(rows)
    assert len(outcomes) == len(labels) and Watched.work <= 40 * len(labels), Watched.work / len(labels)


def test_a_conflicts_dead_letter_names_the_first_other_rows_and_counts_the_rest():
    outcomes = resolve_duplicates(rows_of_one_image(["cat"] * 20 + ["dog"] * 15 + ["cow"]))
    assert [line for line, _ in outcomes] == list(range(1, 37))
    assert all(o.stage == "conflict" for _, o in outcomes)
    cat, dog, cow = outcomes[0][1].reason, outcomes[20][1].reason, outcomes[35][1].reason
    assert cat.startswith("conflict: img/a.jpg has label 'cat', split 'train' here but line 21 (label 'dog'")
    assert "line 30 (label 'dog', split 'train') and 6 more; none of its rows is converted" in cat
    assert dog.startswith("conflict: img/a.jpg has label 'dog', split 'train' here but line 1 (label 'cat'")
    assert "line 10 (label 'cat', split 'train') and 11 more;" in dog
    assert "line 10 (label 'cat', split 'train') and 25 more;" in cow


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
    assert not_text(read) == "invalid UTF-8"
    assert not not_text(["café", "日本", "ok", ""]) and not not_text([])


# Confinement: a row names an image below the CSV's folder or a configured root, else it is a
# `parse` dead letter naming its line (transforms.sources.confinement_problem).

FOLDER = "/csv-folder-of-these-tests/data"  # not on disk: its real paths are its normalised paths
_SEGMENT = st.sampled_from(["..", ".", "", "img", "a", "x.jpg", "data"])
_RELATIVE = st.lists(_SEGMENT, min_size=1, max_size=6).map("/".join)
_URIS = st.one_of(
    _RELATIVE,
    _RELATIVE.map(lambda p: "/" + p),  # absolute, "//" included
    _RELATIVE.map(lambda p: f"{FOLDER}/{p}"),
    _RELATIVE.map(lambda p: f"file://{FOLDER}/{p}"),
    _RELATIVE.map(lambda p: f"gs://bucket/{p}"),
    st.sampled_from(["hdfs://h/x.jpg", "s3://b/x.jpg", "https://example.com/x.jpg"]),
).filter(lambda uri: uri.strip())
_ROOTS = st.lists(
    st.sampled_from([f"{FOLDER}/img", "/csv-folder-of-these-tests/shared", "/", "gs://bucket/img", "gs://other"]),
    unique=True,
)


def _below(path: str, folders) -> bool:
    return any(path.startswith(folder.rstrip("/") + "/") for folder in folders)


def _expected(csv_folder: str, uri: str, roots: list[str], local_files: bool) -> str | None:
    """What a row naming `uri` may read (None: nothing), worked out from the rule, not the code:
    gs:// anywhere unless roots name gs:// prefixes; local paths, by their normalised absolute
    path, below the CSV's folder or a local root, and only where local files are read."""
    remote_roots = [r for r in roots if r.startswith("gs://")]
    if "://" in uri:
        if not uri.startswith("gs://"):
            return None
        return uri if not remote_roots or _below(uri, [*remote_roots, csv_folder]) else None
    if csv_folder.startswith("gs://"):
        bucket, path = csv_folder[len("gs://") :].split("/", 1)
        if not uri.startswith("/"):
            image = f"gs://{bucket}{posixpath.normpath(f'/{path}/{uri}')}"
            return image if _below(image, [csv_folder, *remote_roots]) else None
    image = "/" + os.path.normpath(os.path.join(csv_folder, uri)).lstrip("/")
    local = [f for f in (csv_folder, *roots) if "://" not in f]
    return image if local_files and _below(image, local) else None


def _one_row(csv_uri: str, uri: str, roots: list[str], local_files: bool):
    [outcome] = parse([f"UNASSIGNED,{uri},cat\n"], csv_uri, roots=Roots(tuple(roots), local_files))
    return outcome


@settings(max_examples=400, deadline=None)
@given(_URIS, _ROOTS, st.booleans())
def test_a_local_csv_row_reads_only_below_its_folder_or_a_root(uri, roots, local_files):
    outcome = _one_row(f"{FOLDER}/labels.csv", uri, roots, local_files)
    image = _expected(FOLDER, uri, roots, local_files)
    if image is None:
        assert isinstance(outcome, DeadLetter) and outcome.source == f"{FOLDER}/labels.csv:1"
        assert outcome.stage == "parse" and uri in outcome.reason
    else:  # the split hash and image/source_id keep the URI as the CSV wrote it
        assert outcome == Source(image, uri, "cat", assign_split(uri, FRACTIONS)), outcome


@settings(max_examples=300, deadline=None)
@given(_URIS, _ROOTS, st.booleans())
def test_a_gcs_csv_row_reads_only_below_its_folder_or_a_root(uri, roots, local_files):
    csv_folder = "gs://bucket/data"
    outcome = _one_row(f"{csv_folder}/labels.csv", uri, roots, local_files)
    image = _expected(csv_folder, uri, roots, local_files)
    if image is None:
        assert isinstance(outcome, DeadLetter) and outcome.stage == "parse" and uri in outcome.reason
    else:
        assert outcome == Source(image, uri, "cat", assign_split(uri, FRACTIONS)), outcome


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """A CSV's folder with links in it, to places inside and outside it."""
    base = tmp_path_factory.mktemp("linked")
    data, private = base / "data", base / "private"
    (data / "img").mkdir(parents=True)
    private.mkdir()
    (data / "img" / "a.jpg").write_bytes(b"x")
    (private / "passwd").write_bytes(b"root:x:0:0")
    links = {"in": data / "img", "out": private, "up": base, "root": "/", "a_in.jpg": data / "img" / "a.jpg"}
    links.update({"passwd.jpg": private / "passwd", "loop": data / "loop", "dangling.jpg": base / "gone"})
    for name, target in links.items():
        os.symlink(target, data / name)
    return data


_THROUGH_LINKS = "in out up root loop img .. . a.jpg a_in.jpg passwd.jpg dangling.jpg private passwd data etc"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_THROUGH_LINKS.split()), min_size=1, max_size=5).map("/".join), st.booleans())
def test_a_link_cannot_lead_a_row_out_of_the_csv_folder(linked, uri, private_is_a_root):
    """Local paths are confined by the real path of what the job opens (the normalised path, so
    `out/../in` is `in`, wherever `out` leads): through links."""
    roots = [str(linked.parent / "private")] if private_is_a_root else []
    outcome = _one_row(str(linked / "labels.csv"), uri, roots, True)
    opened = os.path.normpath(os.path.join(linked, uri))
    if _below(os.path.realpath(opened), [os.path.realpath(f) for f in (linked, *roots)]):
        assert isinstance(outcome, Source) and outcome.uri == opened
    else:
        assert isinstance(outcome, DeadLetter) and outcome.stage == "parse" and uri in outcome.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["img", "a", "b.jpg"]), min_size=1, max_size=4).map("/".join), st.data())
def test_every_spelling_of_an_image_is_one_source(path, data):
    """`./p`, `a//b`, `x/../p`, the absolute path: one source, the other rows its duplicates."""
    spellings = [path, f"./{path}", path.replace("/", "//"), f"x/../{path}", f"{FOLDER}/{path}", f"/{FOLDER}/{path}"]
    rows = data.draw(st.permutations(spellings))
    out = parse([f"TRAIN,{uri},cat\n" for uri in rows], f"{FOLDER}/labels.csv")
    assert out[0] == Source(f"{FOLDER}/{path}", rows[0], "cat", "train")
    assert all(isinstance(o, DeadLetter) and o.stage == "duplicate" for o in out[1:])


def test_roots_are_absolute_local_folders_or_gcs_prefixes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(None, {"image_csv": {"roots": ["shared/../images", "/srv/x/", "gs://b", "gs://b/p/"]}})
    assert config.image_csv.roots == (str(tmp_path / "images"), "/srv/x", "gs://b", "gs://b/p/")
    for bad in ("s3://b/x", "file:///srv/x", "gs://", "gs:///x"):
        with pytest.raises(ConfigError, match="neither a local folder nor a gs:// prefix"):
            load_config(None, {"image_csv": {"roots": [bad]}})


def test_a_row_past_the_limits_of_a_row_is_a_dead_letter_and_the_rest_is_read():
    """The image CSV is read within the bounds a tabular CSV is (transforms.csv_records)."""
    out = parse(["img/a.jpg,cat\n", "img/b.jpg," + "," * CSV_DELIMITER_LIMIT + "dog\n", "img/c.jpg,dog\n"])
    assert [(o.uri.rsplit("/", 1)[-1], o.label) for o in out if isinstance(o, Source)] == [
        ("a.jpg", "cat"),
        ("c.jpg", "dog"),
    ]
    [letter] = [o for o in out if isinstance(o, DeadLetter)]
    assert letter.source == "/d/labels.csv:2" and f"more than {CSV_DELIMITER_LIMIT:,}" in letter.reason


def test_each_rows_scheme_is_judged_as_beam_reads_it_however_often_it_comes():
    uris = [f"{scheme}://host/{i}.jpg" for i, scheme in enumerate(["gs", "hdfs", "s3", "foo"] * 2)]
    out = parse([f"TRAIN,{uri},cat\n" for uri in uris], csv_uri="gs://host/labels.csv")
    assert [isinstance(o, Source) for o in out] == [uri.startswith("gs://") for uri in uris]
    assert all("unsupported URI scheme" in o.reason for o in out if isinstance(o, DeadLetter))
    # Beam has a filesystem class for hdfs:// whose extra is not installed: not readable, not an error.
    assert storage.has_filesystem("gs://b/a") and storage.has_filesystem("/a")
    assert not storage.has_filesystem("hdfs://n/a") and not storage.has_filesystem("foo://x/a")
