"""Paths are names, never patterns (core.storage): a folder whose name holds `[ ] * ? { }` is
that folder and no other, for every listing, write and delete, locally and on gs://; only a tabular
run's `--input` is a pattern, in which `[[]`, `[*]` and `[?]` stand for those characters.

Each generated name is paired with a sibling that the name, read as a glob, would match
(`exp[1]` and `exp1`): nothing of the sibling may be listed, changed or deleted.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import uuid

import pytest
from apache_beam.io.filesystem import FileSystem
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core import storage
from core.evidence import OwnFolder
from pipeline.cli import main
from tests.dataset_reader import load_manifest
from tests.test_publication import photos, whole_dataset

SAMPLE_TABULAR = pathlib.Path(__file__).resolve().parents[1] / "sample" / "tabular"
_WORD = st.text("abcxyz019-_", min_size=1, max_size=5)
_GLOB = st.sampled_from(["[1]", "[ab]", "*", "?", "{x,y}", "[", "]", "**"])


@st.composite
def glob_names(draw) -> tuple[str, str]:
    """(a folder name holding glob characters, a different name the first matches as a pattern,
    or the same name where none does: braces are no pattern for Beam)."""
    name = draw(_WORD) + draw(_GLOB) + draw(_WORD)
    sibling = name.replace("[1]", "1").replace("[ab]", "a").replace("**", "zz").replace("*", "zz")
    sibling = sibling.replace("?", "q")
    if sibling != name:
        assume(re.fullmatch(FileSystem.translate_pattern(name), sibling))
    return name, sibling


class Local:
    def __init__(self, base: pathlib.Path):
        self.base = base

    def uri(self, name: str) -> str:
        return str(self.base / name)

    def put(self, uri: str, data: bytes) -> None:
        pathlib.Path(uri).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(uri).write_bytes(data)

    def put_tree(self, local: pathlib.Path, uri: str) -> None:
        shutil.copytree(local, uri)

    def snapshot(self, uri: str) -> dict:
        root = pathlib.Path(uri)
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


class Gcs(Local):
    """gcp-storage-emulator writes `?` and `#` unescaped in the download links it gives out, so an
    object whose name holds one cannot be read back through it (real GCS escapes them): names
    with those are tried locally only."""

    def __init__(self, emulator, bucket: str):
        self.emulator, self.bucket = emulator, bucket

    def uri(self, name: str) -> str:
        return f"gs://{self.bucket}/{name}"

    def put(self, uri: str, data: bytes) -> None:
        self.emulator.upload_bytes(uri, data)

    def put_tree(self, local: pathlib.Path, uri: str) -> None:
        for path in local.rglob("*"):
            if path.is_file():
                self.put(f"{uri}/{path.relative_to(local)}", path.read_bytes())

    def snapshot(self, uri: str) -> dict:
        return {u[len(uri) + 1 :]: self.emulator.read_bytes(u) for u in self.emulator.list_uris(uri + "/")}


@pytest.fixture(params=["local", "gcs"])
def place(request, tmp_path_factory):
    if request.param == "local":
        return Local(tmp_path_factory.mktemp("names"))
    emulator = request.getfixturevalue("gcs_emulator")
    bucket = f"names-{uuid.uuid4().hex[:10]}"
    emulator.create_bucket(bucket)
    return Gcs(emulator, bucket)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=glob_names())
def test_every_storage_operation_takes_a_name_literally(place, names):
    name, sibling = names
    assume(isinstance(place, Local) and not isinstance(place, Gcs) or "?" not in name)
    tag = uuid.uuid4().hex  # a fresh folder each time hypothesis runs an example
    folder = place.uri(f"{tag}/{name}")
    other = place.uri(f"{tag}/{sibling}") if sibling != name else place.uri(f"{tag}/plain")
    for root in (folder, other):
        place.put(f"{root}/a.bin", b"a")
        place.put(f"{root}/sub/b.bin", b"bb")
    before = place.snapshot(other)

    assert sorted(m.path for m in storage.list_below(folder)) == [f"{folder}/a.bin", f"{folder}/sub/b.bin"]
    assert [m.path for m in storage.list_folder(folder)] == [f"{folder}/a.bin"]
    assert storage.children(folder) == ["a.bin", "sub"]
    assert storage.exists(f"{folder}/a.bin") and storage.stat(f"{folder}/sub/b.bin").size_in_bytes == 2
    storage.write_atomically(f"{folder}/a.bin", b"new")
    storage.copy(f"{folder}/a.bin", f"{folder}/c.bin")
    assert storage.read_bytes(f"{folder}/c.bin", inside=folder) == b"new"
    storage.delete([f"{folder}/c.bin"], OwnFolder(folder))
    storage.delete([f"{folder}/sub"], OwnFolder(f"{folder}/sub"))
    assert storage.files_below(folder) == [f"{folder}/a.bin"]
    storage.delete([folder], OwnFolder(folder))
    assert storage.files_below(folder) == []
    assert place.snapshot(other) == before, "the sibling the name matches as a pattern is untouched"


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """A committed image dataset and a tabular one, to stand as the sibling."""
    base = tmp_path_factory.mktemp("sibling")
    assert main(["--input", str(photos(base / "src", 1)), "--output", str(base / "images")]) == 0
    assert main(["--kind", "csv", "--output", str(base / "csv")]) == 0
    return base


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=glob_names(), kind=st.sampled_from(["images", "csv"]))
def test_a_run_into_a_folder_named_like_a_pattern_leaves_its_sibling_alone(
    place, committed, tmp_path_factory, names, kind
):
    """`--output 'exp[1]'` beside a committed `exp1` commits into `exp[1]` without --overwrite,
    and `exp1` keeps every byte (the run lists, writes and deletes names, not matches)."""
    name, sibling = names
    assume(sibling != name and (not isinstance(place, Gcs) or "?" not in name))
    tag = uuid.uuid4().hex
    out, other = place.uri(f"{tag}/{name}"), place.uri(f"{tag}/{sibling}")
    place.put_tree(committed / kind, other)
    before = place.snapshot(other)
    source = ["--input", str(photos(tmp_path_factory.mktemp("src"), 2))] if kind == "images" else ["--kind", "csv"]
    for overwrite in ([], ["--overwrite"]):
        assert main([*source, "--output", out, *overwrite]) == 0
    assert place.snapshot(other) == before
    local = tmp_path_factory.mktemp("check")
    for relative, data in place.snapshot(out).items():
        (local / relative).parent.mkdir(parents=True, exist_ok=True)
        (local / relative).write_bytes(data)
    assert whole_dataset(local).counts.written == (6 if kind == "images" else 1500)


def test_an_input_folder_named_like_a_pattern_is_that_folder(place, tmp_path):
    """`--input 'in[ab]'` beside `ina` lists `in[ab]` only."""
    ours, theirs = photos(tmp_path / "ours", 1), photos(tmp_path / "theirs", 2)
    place.put_tree(ours, place.uri("in[ab]"))
    place.put_tree(theirs, place.uri("ina"))
    out = tmp_path / "out"
    assert main(["--input", place.uri("in[ab]"), "--output", str(out)]) == 0
    assert load_manifest(out).counts.written == 3


def test_a_tabular_pattern_can_name_glob_characters_literally(tmp_path):
    """Only a tabular `--input` is a pattern; `[[]` stands for `[` in it."""
    for folder, files in (("exp[1]", ["a.csv"]), ("exp1", ["b.csv", "c.csv"])):
        (tmp_path / folder).mkdir()
        for file in files:
            shutil.copy(SAMPLE_TABULAR / "part-000.csv", tmp_path / folder / file)
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", f"{tmp_path}/exp[[]1]/*.csv", "--output", str(out)]) == 0
    assert load_manifest(out).listing.files == 1
