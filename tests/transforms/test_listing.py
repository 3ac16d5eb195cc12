"""Listing class folders: nothing below the input folder may vanish from the listing. What cannot
be listed (an unreadable folder, a link not followed, a dangling link) and images whose names are
not UTF-8 come back as dead letters, the same on the planner's side and in the job; a job step
that runs in the planner's process takes the planner's listing (listing_handover) instead of
listing again, and lists when none is kept under its key. A file pattern (the CSV kind) lists
what Beam's `match` lists, and the dangling links it drops."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import apache_beam as beam
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from core import storage
from transforms import listing_handover
from transforms.outcomes import DeadLetter, Skipped, Source
from transforms.sources import ClassFolders, ListClassFolders, printable_path

EXTENSIONS = frozenset({".jpg", ".png"})
FRACTIONS = (("train", 0.8), ("validation", 0.2))
BAD_NAME = os.fsdecode(b"bad\xff.jpg")  # what os.listdir gives for these bytes: 'bad\udcff.jpg'
LINKED_FOLDER = "a symbolic link to a folder: not followed (link or copy the files instead)"


def beam_match(pattern: str):
    """Beam's own glob matching, the reference a literal listing must agree with on plain names."""
    return [m for result in FileSystems.match([pattern]) for m in result.metadata_list]


def _tree(root: pathlib.Path) -> pathlib.Path:
    (root / "cat").mkdir(parents=True)
    (root / "dog" / "sub").mkdir(parents=True)
    (root / "cat" / "1.jpg").write_bytes(b"x")
    (root / "dog" / "sub" / "2.png").write_bytes(b"yy")
    (root / "dog" / "notes.txt").write_bytes(b"z")
    return root


def _outcomes(root: pathlib.Path) -> list:
    classify = ClassFolders(str(root), EXTENSIONS, FRACTIONS)
    return [classify.listed(e) for e in storage.list_below(str(root))]


def test_list_below_lists_every_file_like_match(tmp_path):
    root = _tree(tmp_path / "in")
    listed = sorted((m.path, m.size_in_bytes) for m in storage.list_below(str(root)))
    matched = sorted((m.path, m.size_in_bytes) for m in beam_match(str(root) + "/**"))
    assert listed == matched and len(listed) == 3
    assert list(storage.list_below(str(tmp_path / "missing"))) == []


def test_non_utf8_image_name_is_a_dead_letter_naming_the_file(tmp_path):
    root = _tree(tmp_path / "in")
    bad = os.path.join(str(root / "cat"), BAD_NAME)
    with open(bad, "wb") as f:
        f.write(b"x")
    with open(os.path.join(str(root / "cat"), os.fsdecode(b"notes\xfe.txt")), "wb") as f:
        f.write(b"x")
    outcomes = _outcomes(root)
    assert len(outcomes) == 5
    letters = [o for o in outcomes if isinstance(o, DeadLetter)]
    assert letters == [DeadLetter(str(root / "cat") + "/bad\\xff.jpg", "list", "file name is not valid UTF-8")]
    assert Skipped(str(root / "cat") + "/notes\\xfe.txt", ".txt") in outcomes
    for o in outcomes:  # every outcome can be written as UTF-8 text
        (o.uri if isinstance(o, Source) else o.source).encode("utf-8")
    assert printable_path("/d/ok/é.jpg") == "/d/ok/é.jpg"
    assert ClassFolders("/d", EXTENSIONS, FRACTIONS).file("/d/cat/é.jpg").label == "cat"


def test_what_cannot_be_listed_in_a_hidden_place_is_skipped_as_hidden(tmp_path):
    """Below a hidden name nothing is data: a link not followed or a dangling one there is
    skipped, as an unreadable `.Trash-1000/` would be, not a dead letter that weighs in the budget."""
    root = _tree(tmp_path / "in")
    elsewhere = _tree(tmp_path / "elsewhere")
    os.symlink(elsewhere / "cat", root / ".linked_class")
    os.symlink(tmp_path / "nothing.jpg", root / "cat" / ".dangling.jpg")
    hidden = [o for o in _outcomes(root) if isinstance(o, Skipped) and o.extension == "(hidden)"]
    assert sorted(hidden) == [
        Skipped(str(root / ".linked_class"), "(hidden)"),
        Skipped(str(root / "cat" / ".dangling.jpg"), "(hidden)"),
    ]
    unreadable = storage.Unlisted(str(root / ".Trash-1000"), "cannot list this folder: PermissionError")
    assert ClassFolders(str(root), EXTENSIONS, FRACTIONS).listed(unreadable) == Skipped(unreadable.path, "(hidden)")


def test_links_that_are_not_followed_are_dead_letters(tmp_path):
    root = _tree(tmp_path / "in")
    elsewhere = _tree(tmp_path / "elsewhere")
    os.symlink(elsewhere / "cat", root / "linked_class")
    os.symlink(tmp_path / "nothing.jpg", root / "cat" / "dangling.jpg")
    os.symlink(elsewhere / "cat" / "1.jpg", root / "cat" / "linked.jpg")  # a link to a file is read
    letters = {o.source: o.reason for o in _outcomes(root) if isinstance(o, DeadLetter)}
    dangling = f"a link to {tmp_path / 'nothing.jpg'}, which does not exist (dangling link)"
    assert letters == {
        str(root / "linked_class"): LINKED_FOLDER,
        str(root / "cat" / "dangling.jpg"): dangling,
    }
    assert str(root / "cat" / "linked.jpg") in {o.uri for o in _outcomes(root) if isinstance(o, Source)}


def _reads_despite_permissions() -> bool:
    """True where chmod 000 does not stop this process listing a folder (root, with
    CAP_DAC_READ_SEARCH): probed, not guessed from the uid."""
    probe = tempfile.mkdtemp()
    try:
        os.chmod(probe, 0)
        os.listdir(probe)
        return True
    except PermissionError:
        return False
    finally:
        os.chmod(probe, 0o700)
        os.rmdir(probe)


needs_unreadable_folders = pytest.mark.skipif(
    _reads_despite_permissions(),
    reason="this process reads folders whatever their mode (root), so chmod 000 cannot make one unreadable; "
    "tests/test_end_to_end_bad_listing.py covers it in a subprocess without the capability",
)


@needs_unreadable_folders
def test_unreadable_folder_is_a_dead_letter(tmp_path):
    root = _tree(tmp_path / "in")
    (root / "dog" / "sub").chmod(0)
    try:
        outcomes = _outcomes(root)
    finally:
        (root / "dog" / "sub").chmod(0o755)
    letters = [o for o in outcomes if isinstance(o, DeadLetter)]
    assert [(o.source, o.stage) for o in letters] == [(str(root / "dog" / "sub"), "list")]
    assert "PermissionError" in letters[0].reason


def test_the_job_lists_what_the_planner_lists(tmp_path):
    root = _tree(tmp_path / "in")
    with open(os.path.join(str(root / "dog"), BAD_NAME), "wb") as f:
        f.write(b"x")
    os.symlink(tmp_path / "nothing", root / "cat" / "dangling.jpg")
    (tmp_path / "other").mkdir()
    os.symlink(tmp_path / "other", root / "linked")
    expected = _outcomes(root)
    assert len(expected) == 6
    with TestPipeline() as p:
        listed = p | beam.Impulse() | ListClassFolders(str(root), EXTENSIONS, FRACTIONS)
        sources = listed.sources | beam.FlatMap(lambda sources: sources)
        assert_that((sources, listed.skipped, listed.dead_letters) | beam.Flatten(), equal_to(expected), label="All")
    shutil.rmtree(root)


def _assert_the_job_lists(root: pathlib.Path, listed_here: str | None, expected: list) -> None:
    with TestPipeline() as p:
        listed = p | beam.Impulse() | ListClassFolders(str(root), EXTENSIONS, FRACTIONS, listed_here)
        sources = listed.sources | beam.FlatMap(lambda sources: sources)
        assert_that((sources, listed.skipped, listed.dead_letters) | beam.Flatten(), equal_to(expected), label="All")


def test_the_job_takes_the_listing_the_planner_kept_here(tmp_path):
    root = _tree(tmp_path / "in")
    planned = _outcomes(root)
    key = listing_handover.keep(planned)
    try:
        (root / "cat" / "later.jpg").write_bytes(b"new")  # lands after planning
        _assert_the_job_lists(root, key, planned)  # what was planned, not listed again
        _assert_the_job_lists(root, key, planned)  # a step that runs again takes it again
        listing_handover.keep([])  # a later plan's listing replaces it
        relisted = _outcomes(root)
        assert len(relisted) == len(planned) + 1
        _assert_the_job_lists(root, key, relisted)  # nothing under the key: listed again
    finally:
        listing_handover.forget()
    assert listing_handover.take(key) is None


def test_a_pattern_lists_what_match_lists_and_the_dangling_links_it_drops(tmp_path):
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    for name in ("a.csv", "b.csv.gz", "notes.txt", "sub/c.csv"):
        (root / name).write_bytes(b"id\n1\n")
    os.mkfifo(root / "pipe.csv")  # listed: reading it is the reader's business (a `read` dead letter)
    os.symlink(root / "a.csv", root / "linked.csv")
    os.symlink("missing.csv", root / "gone.csv")
    os.symlink(root / "missing", root / "sub" / "gone.csv")
    os.symlink(root / "sub", root / "folder.csv")  # not a file; reported only where `**` could reach into it
    gone = {
        str(root / "gone.csv"): f"a link to {root / 'missing.csv'}, which does not exist (dangling link)",
        str(root / "sub" / "gone.csv"): f"a link to {root / 'missing'}, which does not exist (dangling link)",
        str(root / "folder.csv"): f"{LINKED_FOLDER}; it may hold files the pattern matches",
    }
    for pattern, dangling in [
        (f"{root}/*.csv*", ["gone.csv"]),
        (f"{root}/**.csv", ["folder.csv", "gone.csv", "sub/gone.csv"]),
        (f"{root}/sub/", ["sub/gone.csv"]),
        (f"{root}/gone.csv", ["gone.csv"]),
        (f"{root}/a.csv", []),
        (f"{tmp_path}/nowhere/*.csv", []),
    ]:
        listed = list(storage.list_matching(pattern))
        files = sorted((m.path, m.size_in_bytes, m.last_updated_in_seconds) for m in beam_match(pattern))
        assert (
            sorted(
                (m.path, m.size_in_bytes, m.last_updated_in_seconds)
                for m in listed
                if not isinstance(m, storage.Unlisted)
            )
            == files
        ), pattern
        unlisted = {u.path: u.reason for u in listed if isinstance(u, storage.Unlisted)}
        assert unlisted == {str(root / name): gone[str(root / name)] for name in dangling}, pattern


def _dated_tree(root: pathlib.Path) -> pathlib.Path:
    """root/2024-01/part.csv, and links to a folder (which the listing does not enter, as it cannot
    enter an unreadable one) at depth 1 (2024-02, 2023-12, sub.csv) and depth 2 (2024-01/nested)."""
    (root / "2024-01").mkdir(parents=True)
    (root / "2024-01" / "part.csv").write_bytes(b"id\n1\n")
    (root.parent / "elsewhere").mkdir()
    for name in ("2024-02", "2023-12", "sub.csv", "2024-01/nested"):
        os.symlink(root.parent / "elsewhere", root / name)
    return root


@pytest.mark.parametrize(
    "pattern, reported",
    [
        ("*.csv", []),  # each link lies at the file's depth: a file there is one of root's, not inside
        ("2024-01/", []),
        ("*/part.csv", ["2023-12", "2024-02", "sub.csv"]),  # 2024-01/nested: where part.csv would be
        ("2024-*/*.csv", ["2024-02"]),
        ("*/*/part.csv", ["2023-12", "2024-01/nested", "2024-02", "sub.csv"]),
        ("**/*.csv", ["2023-12", "2024-01/nested", "2024-02", "sub.csv"]),
        ("2024-*/**.csv", ["2024-01/nested", "2024-02"]),
    ],
)
def test_a_pattern_reports_each_folder_it_cannot_enter_that_could_hold_matches(tmp_path, pattern, reported):
    root = _dated_tree(tmp_path / "in")
    listed = list(storage.list_matching(f"{root}/{pattern}"))
    unlisted = {u.path: u.reason for u in listed if isinstance(u, storage.Unlisted)}
    expected = f"{LINKED_FOLDER}; it may hold files the pattern matches"
    assert unlisted == {str(root / name): expected for name in reported}
    files = [m.path for m in listed if not isinstance(m, storage.Unlisted)]
    assert sorted(files) == sorted(m.path for m in beam_match(f"{root}/{pattern}"))


@needs_unreadable_folders
@pytest.mark.parametrize("pattern, reported", [("**/*.csv", True), ("*/x.csv", True), ("*.csv", False)])
def test_a_pattern_reports_an_unreadable_folder_that_could_hold_matches(tmp_path, pattern, reported):
    root = _tree(tmp_path / "in")
    (root / "dog").chmod(0)
    try:
        listed = list(storage.list_matching(f"{root}/{pattern}"))
    finally:
        (root / "dog").chmod(0o755)
    unlisted = [u for u in listed if isinstance(u, storage.Unlisted)]
    assert [u.path for u in unlisted] == ([str(root / "dog")] if reported else [])
    assert all("PermissionError" in u.reason for u in unlisted)
