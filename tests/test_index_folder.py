"""Record indexes live in the dataset's `index/` folder, which no reader's shard pattern reaches.

Readers find shards by a pattern in the dataset's folder (`train-*` for TFDV and the TPU reference
readers, `*.tfrecord*`, TFX's per-split patterns): an index beside its shard matched them too. A
pattern made of a shard name's pieces and wildcards matches no index file, for TensorFlow's glob
and Python's alike. The folder is the run's to write and to clean: a link planted in its place
stops the run before any work, and no copy or delete below a linked folder leaves the dataset.
"""

from __future__ import annotations

import glob
import os
import pathlib

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import local_writes, storage
from core.contract.layout import INDEX_FOLDER, index_file
from core.evidence import NamedBy
from pipeline.cli import main
from pipeline.folder_store import _real_folders
from tests.dataset_reader import load_manifest
from tests.test_links import snapshot
from tests.test_publication import photos, whole_dataset

INDEXED = ["--compression", "none", "--index", "--num_shards", "2"]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> pathlib.Path:
    source = photos(tmp_path_factory.mktemp("src"), 3)
    out = tmp_path_factory.mktemp("indexed") / "dataset"
    assert main(["--input", str(source), "--output", str(out), *INDEXED]) == 0
    return out


def test_the_manifest_names_each_shards_index_in_the_index_folder(indexed):
    manifest = whole_dataset(indexed)
    for split in manifest.splits.values():
        assert split.index_files == tuple(index_file(shard) for shard in split.shards)
        assert all((indexed / name).is_file() for name in split.index_files)
    assert not list(indexed.glob("*.idx"))


@st.composite
def shard_patterns(draw, shards: list[str]) -> str:
    """A glob a reader could write for shards: a shard name's prefix and suffix around `*`, with
    some characters replaced by `?` or a bracket class."""
    name = draw(st.sampled_from(shards))
    cut = draw(st.integers(0, len(name)))
    tail = draw(st.integers(cut, len(name)))
    pattern = list(name[:cut] + "*" + name[tail:])
    for i in draw(st.sets(st.integers(0, len(pattern) - 1), max_size=3)):
        if pattern[i] != "*":
            pattern[i] = draw(st.sampled_from(["?", f"[{pattern[i]}]", "*"]))
    return "".join(pattern)


READERS_PATTERNS = ["train-*", "validation-*", "*.tfrecord*", "*.tfrecord", "*-of-*", "*", "*train*", "*.idx"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_shard_pattern_matches_an_index(indexed, data):
    shards = [s for split in load_manifest(indexed).splits.values() for s in split.shards]
    pattern = data.draw(st.one_of(st.sampled_from(READERS_PATTERNS), shard_patterns(shards)))
    for matched in (tf.io.gfile.glob(str(indexed / pattern)), glob.glob(str(indexed / pattern))):
        assert not [m for m in matched if m.endswith(".idx")], pattern
    assert {os.path.basename(m) for m in tf.io.gfile.glob(str(indexed / "train-*"))} == {
        s for s in shards if s.startswith("train-")
    }


def test_a_link_in_the_index_folders_place_stops_the_run(tmp_path):
    victim = tmp_path / "victim"
    (victim / INDEX_FOLDER).mkdir(parents=True)
    (victim / INDEX_FOLDER / "keep.txt").write_text("keep me\n")
    source, out = photos(tmp_path / "src", 2), tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), *INDEXED]) == 0
    for name in sorted((out / INDEX_FOLDER).iterdir()):  # the victim holds files of the same names
        (victim / INDEX_FOLDER / name.name).write_text("not yours\n")
    before = snapshot(victim)
    (out / INDEX_FOLDER).rename(tmp_path / "moved")
    (out / INDEX_FOLDER).symlink_to(victim / INDEX_FOLDER, target_is_directory=True)
    for more in ([*INDEXED, "--overwrite"], ["--overwrite"]):
        assert main(["--input", str(source), "--output", str(out), *more]) == 2
    assert snapshot(victim) == before
    assert (out / INDEX_FOLDER).is_symlink()


def test_overwrites_leave_exactly_the_index_files_the_manifest_names(tmp_path):
    source, out = photos(tmp_path / "src", 3), tmp_path / "out"
    argv = ["--input", str(source), "--output", str(out), "--overwrite"]
    assert main([*argv, *INDEXED]) == 0
    (out / INDEX_FOLDER / "notes.txt").write_text("a user's file\n")
    stray = index_file("train-00007-of-00009.tfrecord")  # named like an index, by no manifest: not a run's
    (out / stray).write_text("0 10\n")
    assert main([*argv, "--compression", "none", "--index", "--num_shards", "3"]) == 0
    manifest = whole_dataset(out)
    named = {f for split in manifest.splits.values() for f in split.index_files}
    assert {f"{INDEX_FOLDER}/{p.name}" for p in (out / INDEX_FOLDER).iterdir()} == named | {"index/notes.txt", stray}
    (out / INDEX_FOLDER / "notes.txt").unlink()
    (out / stray).unlink()
    assert main(argv) == 0  # GZIP, no index: the index folder goes with the files in it
    assert not (out / INDEX_FOLDER).exists()
    whole_dataset(out)


@st.composite
def planted_trees(draw):
    """Relative file names below up to three nested folders, and which folders are links."""
    folders = draw(st.lists(st.sampled_from(["a", "a/b", "a/b/c", "index", "d"]), min_size=1, unique=True))
    names = [f"{folder}/{leaf}" for folder in folders for leaf in draw(st.sets(st.sampled_from("xy"), min_size=1))]
    links = draw(st.sets(st.sampled_from(sorted({f for n in names for f in _ancestors_of(n)}))))
    return names + ["top"], links


def _ancestors_of(name: str) -> list[str]:
    parts = name.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=planted_trees(), make=st.booleans())
def test_nothing_is_written_or_deleted_below_a_linked_folder(tmp_path_factory, tree, make):
    names, links = tree
    base = tmp_path_factory.mktemp("tree")
    out, victim = base / "out", base / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep\n")
    out.mkdir()
    for link in sorted(links, key=len):
        if not any(link.startswith(other + "/") for other in links):  # a link below a link cannot be planted
            (out / link).parent.mkdir(parents=True, exist_ok=True)
            (out / link).symlink_to(victim, target_is_directory=True)
    planted = {link for link in links if not any(link.startswith(other + "/") for other in links)}
    below_link = {n for n in names if any(a in planted for a in _ancestors_of(n))}
    if make and below_link:
        with pytest.raises(local_writes.LinkOnPath):
            _real_folders(str(out), names)
    elif make:
        assert _real_folders(str(out), names) == names and all((out / n).parent.is_dir() for n in names)
    else:  # a delete of every name, as a manifest naming them all would make it (core.storage.delete)
        for name in names:
            if name not in below_link:
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_text(name)
        because = NamedBy(str(out), frozenset(names), str(out / "manifest.json"))
        deleted = storage.delete([str(out / name) for name in names], because)
        assert {pathlib.Path(path).relative_to(out).as_posix() for path in deleted} == set(names) - below_link
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]
