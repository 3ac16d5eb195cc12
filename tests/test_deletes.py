"""Deleting (issue 47): every delete names a path that this run wrote, that a manifest of the
folder names, or that is a folder only runs make, proven a run's; no name is chosen by its shape.

The chokepoint is core.storage.delete, which takes that evidence (core.evidence) and refuses a
delete it does not cover. The scan below fails when any module of core/, pipeline/ or transforms/
deletes another way (os.remove, os.unlink, os.rmdir, shutil.rmtree, Path.unlink/rmdir, a GCS
blob's or Beam's delete, tempfile.TemporaryDirectory) outside the functions listed in
EXCEPTIONS, or calls the chokepoint without evidence. Beside it, generated cases: DEST folders
holding the user's files named like a run's (`*.labels.txt`, `train-*`, `errors-*`,
`manifest*.json`, `index/`, `.tmp`, `.staging-*`) among what dead runs really left, locally and on
gs://: after an `--overwrite`, or a run that fails, every file of the user's is there as it was,
what the runs left is gone, and a run that would write under a user's name is refused in one line.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import pathlib
import uuid

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from core import storage
from core.contract.layout import MANIFEST_NAME, REJECTED_MANIFEST_NAME, STAGING_PREFIX
from core.contract.versions import new_run
from core.evidence import MadeFolders, NamedBy, OwnFolder, RunFolders, Unproven
from pipeline.cli import main
from pipeline.folder_store import REPLACED_NAME, referenced
from pipeline.readback import CountShardRecords
from tests.code_scan import attribute_name, places, places_in, receiver
from tests.dataset_reader import load_manifest
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline
from tests.test_publication import photos

# Names that delete (a call or a reference: `atexit.register(shutil.rmtree, ...)` deletes too):
# the standard library's, Beam's FileSystems.delete and google-cloud-storage's, and the helpers
# of the chokepoint that reach them.
DELETERS = {
    "unlink",
    "rmdir",
    "removedirs",
    "rmtree",
    "delete",
    "delete_blob",
    "delete_blobs",
    "TemporaryDirectory",
    "delete_if_unchanged",
    "_delete_local",
    "_delete_objects",
    "_delete_generation",
    "_delete_blob",
}
OS_DELETERS = {"remove"}  # os.remove (a list's `remove` is no delete)
CHOKEPOINT = ("core.storage", "delete")
# Where a delete is made other than by calling the chokepoint with evidence, and why.
EXCEPTIONS = {
    CHOKEPOINT: "the chokepoint: it checks the evidence, then calls its helpers",
    ("core.storage", "_delete_local"): "the chokepoint's local deletes",
    ("core.storage", "_delete_objects"): "the chokepoint's gs:// deletes",
    ("core.storage", "_delete_generation"): "the chokepoint's fenced gs:// delete of one object",
    ("core.storage", "_delete_blob"): "the chokepoint's gs:// delete of one object",
    ("core.storage", "delete_if_unchanged"): "the lease file, only while it holds the token this run wrote",
    ("pipeline.lease", "Lease.release"): "releases the lease by storage.delete_if_unchanged",
    ("pipeline.job_lease", "JobLease.release"): "releases the job's lease by storage.delete_if_unchanged",
    ("core.local_writes", "create_new"): "the name a writer creates anew in its own folder (a repeated step's file)",
    ("core.local_writes", "replace_atomically"): "its own temporary file, made exclusively, when the write fails",
    ("core.local_writes", "link_into_place"): "its own temporary link, when the rename found the file in place",
    ("core.array_record_files", "write_shard"): "its own temporary file and folder (made exclusively)",
    ("core.array_record_files", "_local_copy"): "its own temporary folder, for a gs:// shard read whole",
    ("transforms.tabular_spill", "spill_folder"): "the system temporary folder it made (mkdtemp), at exit",
    ("transforms.tabular_spill", "permuted_rows"): "a bucket's spill files, which it wrote and has read",
}


def _deleter(node: ast.AST) -> str | None:
    """The delete a node names, as `receiver.name` (or `name`); None when it names none."""
    if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil", "pathlib", "tempfile"):
        names = [alias.name for alias in node.names if alias.name in DELETERS | OS_DELETERS]
        return f"from {node.module} import {names[0]}" if names else None
    name = attribute_name(node) if isinstance(node, ast.Attribute | ast.Name) else None
    if name in DELETERS or (name in OS_DELETERS and receiver(node) == "os"):
        return f"{receiver(node)}.{name}" if receiver(node) else name
    return None


def _chokepoint_call(module: str, node: ast.AST) -> ast.AST | None:
    """The function node of a call of the chokepoint (`storage.delete(...)`, `delete(...)` in
    core.storage, or a Fence's `fence.delete(...)`, which is storage.delete behind the lease);
    None for any other node."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    direct = isinstance(func, ast.Name) and func.id == "delete" and module == CHOKEPOINT[0]
    through = isinstance(func, ast.Attribute) and func.attr == "delete" and receiver(func) in ("storage", "fence")
    return func if direct or through else None


def bypasses(found) -> list[str]:
    """Every delete among `found` (code_scan.Place) made outside the chokepoint and EXCEPTIONS, and
    every call of the chokepoint without evidence (its second argument, `because`)."""
    found = list(found)
    calls = {}
    for place in found:
        func = _chokepoint_call(place.module, place.node)
        if func is not None:
            calls[id(func)] = place
    wrong = []
    for place in found:
        if id(place.node) in calls:
            call = calls[id(place.node)].node
            if len(call.args) < 2 and not any(k.arg == "because" for k in call.keywords):
                wrong.append(f"{place}: a delete without evidence")
            continue
        what = _deleter(place.node)
        if what and (place.module, place.function) not in EXCEPTIONS:
            wrong.append(f"{place}: {what}")
    return wrong


def test_nothing_deletes_but_through_the_chokepoint():
    wrong = bypasses(places())
    assert not wrong, "deletes that bypass core.storage.delete:\n" + "\n".join(wrong)


def test_every_exception_is_still_there():
    """An exception no code needs any more is taken off the list, so that the list stays exact."""
    used = {(p.module, p.function) for p in places() if _deleter(p.node)}
    assert set(EXCEPTIONS) <= used, sorted(set(EXCEPTIONS) - used)


@pytest.mark.parametrize(
    "code",
    [
        "import os\ndef f(p):\n    os.remove(p)",
        "import shutil, atexit\ndef f(p):\n    atexit.register(shutil.rmtree, p)",
        "def f(path):\n    path.unlink(missing_ok=True)",
        "from apache_beam.io.filesystems import FileSystems\ndef f(p):\n    FileSystems.delete([p])",
        "def f(blob):\n    blob.delete()",
        "from os import unlink",
        "from core import storage\ndef f(p):\n    storage.delete([p])",
        "def f(fence, p):\n    fence.delete([p])",
        "import tempfile\ndef f():\n    with tempfile.TemporaryDirectory() as t:\n        pass",
    ],
)
def test_the_scan_finds_each_way_to_delete(code):
    assert bypasses(places_in("pipeline.planted", ast.parse(code)))


def test_the_scan_passes_a_delete_with_its_evidence():
    code = "from core import storage\ndef f(p, because):\n    storage.delete([p], because)\n    items.remove(p)"
    assert bypasses(places_in("pipeline.planted", ast.parse(code))) == []


# --- the chokepoint judges the evidence, as generated


_PARTS = st.sampled_from(["out", "out-2", "o", "..", ".", "index", "x", ".staging-20250101T000000000000Z-0123abcd"])


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(_PARTS, min_size=1, max_size=4), named=st.sets(st.sampled_from(["x", "index/x", "out/x"])))
def test_the_evidence_covers_exactly_its_paths(parts, named):
    path = "/base/" + "/".join(parts)
    relative = path[len("/base/out/") :] if path.startswith("/base/out/") else None
    plain = relative is not None and ".." not in relative.split("/") and "." not in relative.split("/")
    assert OwnFolder("/base/out").covers(path) == (path == "/base/out" or plain)
    assert NamedBy("/base/out", frozenset(named), "m").covers(path) == (
        plain and (relative in named or any(n.startswith(relative + "/") for n in named))
    )
    assert RunFolders("/base", frozenset(["out", parts[0]])).covers(path) == (
        parts[0] == ".staging-20250101T000000000000Z-0123abcd" and ".." not in parts and "." not in parts
    )
    assert MadeFolders(("/base/out",)).covers(path) == (path == "/base/out")


def test_an_unproven_delete_deletes_nothing(tmp_path):
    (tmp_path / "out").mkdir()
    for name in ("mine.txt", "theirs.txt"):
        (tmp_path / "out" / name).write_text(name)
    because = NamedBy(str(tmp_path / "out"), frozenset(["mine.txt"]), "manifest.json")
    with pytest.raises(Unproven, match="theirs.txt"):
        storage.delete([str(tmp_path / "out" / "mine.txt"), str(tmp_path / "out" / "theirs.txt")], because)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["mine.txt", "theirs.txt"]


# --- DEST folders of the user's files among what runs left


# The user's files (a name ending in "/" is a folder holding one), named as a run's might be.
USER_NAMES = (
    "classes.labels.txt",
    "image-class-label.labels.txt",
    "train-00000-of-00002.tfrecord.gz",
    "train-00001-of-00002.tfrecord",
    "train-00003-of-00009.tfrecord.gz",
    "validation-00001-of-00003.tfrecord",
    "errors-00000-of-00001.jsonl",
    "errors-00002-of-00004.jsonl",
    "copies-00000-of-00001.jsonl",
    "manifest.json.tmp",
    "manifest.v1.json",
    "manifest.rejected.json",
    "dataset_info.json",
    "features.json",
    "index/train-00000-of-00002.tfrecord.gz.idx",
    "index/notes.txt",
    ".tmp",
    ".notes.tmp",
    ".train-00000-of-00002.tfrecord.gz.a1b2c3.tmp",
    ".manifest.json.ff00.tmp",
    ".staging-site/",
    ".staging-20250101T000000Z/",
    ".staging-20250101T000000000000Z-NOTHEX00/",
    "beam-temp-x/",
    ".shard-parts/",
)
# What dead runs left, as they leave it (`_left`).
LEFTOVERS = ("dead run", "dead first commit", "rejected run", "stopped replace")


class Local:
    def __init__(self, base: pathlib.Path):
        self.base = base

    def dest(self) -> str:
        return str(self.base / uuid.uuid4().hex / "out")

    def put(self, uri: str, data: bytes) -> None:
        pathlib.Path(uri).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(uri).write_bytes(data)

    def copy(self, source: str, destination: str) -> None:
        """A run's copy of a staged file (storage.copy): a hard link."""
        os.link(source, destination)

    def files(self, uri: str) -> dict[str, bytes]:
        root = pathlib.Path(uri)
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    def local(self, uri: str) -> pathlib.Path:
        """The folder, or a local copy of its top-level files, for load_manifest."""
        return pathlib.Path(uri)


class Gcs(Local):
    def __init__(self, base: pathlib.Path, emulator, bucket: str):
        super().__init__(base)
        self.emulator, self.bucket = emulator, bucket

    def dest(self) -> str:
        return f"gs://{self.bucket}/{uuid.uuid4().hex}/out"

    def put(self, uri: str, data: bytes) -> None:
        self.emulator.upload_bytes(uri, data)

    def copy(self, source: str, destination: str) -> None:
        self.emulator.upload_bytes(destination, self.emulator.read_bytes(source))

    def files(self, uri: str) -> dict[str, bytes]:
        return {u[len(uri) + 1 :]: self.emulator.read_bytes(u) for u in self.emulator.list_uris(uri + "/")}

    def local(self, uri: str) -> pathlib.Path:
        copy = self.base / uuid.uuid4().hex
        copy.mkdir()
        for name, data in self.files(uri).items():
            if "/" not in name:
                (copy / name).write_bytes(data)
        return copy


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Source photos, and datasets of them in 2 and 3 shards a split, whose files dead runs leave."""
    base = tmp_path_factory.mktemp("deletes")
    source = photos(base / "src", 2)
    for shards in (2, 3):
        assert main(["--input", str(source), "--output", str(base / f"d{shards}"), "--num_shards", str(shards)]) == 0
    return base


def _put_dataset(place, made: pathlib.Path, shards: int, where: str, run: str) -> dict[str, bytes]:
    """The dataset of `shards` shards a split, renamed to `run`, with its files below `where`:
    its manifest (as bytes) and files by name."""
    manifest = dataclasses.replace(load_manifest(made / f"d{shards}"), run=run)
    files = {name: (made / f"d{shards}" / name).read_bytes() for name in referenced(manifest) - {MANIFEST_NAME}}
    for name, data in files.items():
        place.put(f"{where}/{name}", data)
    return {MANIFEST_NAME: manifest.to_json().encode(), **files}


def _left(place, made: pathlib.Path, out: str, kind: str) -> set[str]:
    """What a dead run of `kind` leaves in `out` (holding the 2-shard dataset when it is
    committed): returns the names it leaves there that the next run removes."""
    run = new_run()
    staging = f"{out}/{STAGING_PREFIX}{run}"
    if kind == "dead run":  # killed while its job wrote
        place.put(f"{staging}/.shard-parts/train-00000-x", b"part")
        return {f"{STAGING_PREFIX}{run}/.shard-parts/train-00000-x"}
    if kind == "dead first commit":  # killed while it copied its files into an empty DEST
        dataset = _put_dataset(place, made, 2, staging, run)
        place.put(f"{staging}/{MANIFEST_NAME}", dataset[MANIFEST_NAME])
        copied = sorted(set(dataset) - {MANIFEST_NAME})[:2]
        for name in copied:
            place.copy(f"{staging}/{name}", f"{out}/{name}")
        return {f"{STAGING_PREFIX}{run}/{name}" for name in dataset} | set(copied)
    if kind == "rejected run":  # rejected, into an empty DEST
        manifest = dataclasses.replace(load_manifest(made / "d2"), run=run, rejected=("over the error budget",))
        place.put(f"{out}/{REJECTED_MANIFEST_NAME}", manifest.to_json().encode())
        place.put(f"{out}/{manifest.error_files[0]}", b"")
        return {REJECTED_MANIFEST_NAME, manifest.error_files[0]}
    # "stopped replace": the 3-shard dataset was replaced by the committed 2-shard one, and the run
    # died before it removed the files only the 3-shard manifest named.
    replaced = _put_dataset(place, made, 3, out, "replaced")
    place.put(f"{staging}/{REPLACED_NAME}", replaced.pop(MANIFEST_NAME))
    place.put(f"{staging}/{MANIFEST_NAME}", load_manifest(pathlib.Path(made / "d2")).to_json().encode())
    return {f"{STAGING_PREFIX}{run}/{REPLACED_NAME}", f"{STAGING_PREFIX}{run}/{MANIFEST_NAME}"} | (
        set(replaced) - referenced(load_manifest(made / "d2"))
    )


@st.composite
def dest_mixes(draw):
    committed = draw(st.booleans())
    users = draw(st.sets(st.sampled_from(USER_NAMES), max_size=6))
    kinds = ["dead run", "stopped replace"] if committed else ["dead run", "dead first commit", "rejected run"]
    left = draw(st.sets(st.sampled_from(kinds), max_size=2))
    assume(not {"dead first commit", "rejected run"} <= left)  # both leave errors-00000-of-00001.jsonl
    return committed, users, sorted(left), draw(st.sampled_from(["GZIP", "NONE"])), draw(st.booleans())


def _refused_for(users: set[str], committed: bool, compression: str) -> list[str]:
    """The user's names this run (2 shards a split) writes under: it is refused for them."""
    suffix = ".tfrecord.gz" if compression == "GZIP" else ".tfrecord"
    writes = {f"{split}-0000{i}-of-00002{suffix}" for split in ("train", "validation") for i in range(2)}
    writes |= {"errors-00000-of-00001.jsonl", "copies-00000-of-00001.jsonl"}
    return sorted(users & (writes | (set() if committed else {REJECTED_MANIFEST_NAME})))


def _check_a_mix(place, made, mix, monkeypatch, caplog) -> None:
    committed, users, left, compression, fails = mix
    out = place.dest()
    before = {}
    if committed:
        before = _put_dataset(place, made, 2, out, "committed")
        place.put(f"{out}/{MANIFEST_NAME}", before[MANIFEST_NAME])
    gone = set()
    for kind in left:
        gone |= _left(place, made, out, kind)
    theirs = {}
    for name in users:
        path = f"{name}inside.txt" if name.endswith("/") else name
        assume(path not in gone and path not in before)
        theirs[path] = f"the user's {path}".encode()
        place.put(f"{out}/{path}", theirs[path])
    if fails:
        monkeypatch.setattr(CountShardRecords, "process", _fail)
    argv = ["--input", str(made / "src"), "--output", out, "--num_shards", "2", "--compression", compression.lower()]
    caplog.clear()
    code = main([*argv, "--overwrite", "--allow_other_files"])
    monkeypatch.undo()
    after = place.files(out)
    assert {name: after.get(name) for name in theirs} == theirs, "a file of the user's was deleted or changed"
    refused = _refused_for(set(theirs), committed, compression)
    if refused:
        assert code == 2, caplog.text
        [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert f"{out}/{refused[0]}" in line and "choose another --output" in line, line
        return
    assert code == (3 if fails else 0), caplog.text
    dataset = referenced(load_manifest(place.local(out))) if code == 0 else set(before)
    assert not (gone - dataset) & set(after), "what dead runs left is still there"
    assert set(after) == set(theirs) | dataset, "DEST holds the dataset and the user's files, nothing else"


def _fail(self, path):
    raise OSError(f"disk gone while reading {path}")


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mix=dest_mixes())
# a shard the dead first commit staged but had not copied yet, which the user put in DEST after it
@example(mix=(False, {"train-00000-of-00002.tfrecord.gz"}, ["dead first commit"], "GZIP", False))
def test_the_users_files_survive_an_overwrite_and_a_failed_run(made, tmp_path_factory, monkeypatch, caplog, mix):
    _check_a_mix(Local(tmp_path_factory.mktemp("dest")), made, mix, monkeypatch, caplog)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mix=dest_mixes())
def test_on_gcs_the_users_files_survive_an_overwrite_and_a_failed_run(
    made, tmp_path_factory, monkeypatch, caplog, gcs_emulator, gcs_bucket, mix
):
    _check_a_mix(Gcs(tmp_path_factory.mktemp("dest"), gcs_emulator, gcs_bucket), made, mix, monkeypatch, caplog)


def test_a_user_file_under_a_name_the_run_writes_is_refused_in_one_line(tmp_path):
    source, out = photos(tmp_path / "src", 2), tmp_path / "out"
    out.mkdir()
    (out / "errors-00000-of-00001.jsonl").write_text("my own error log\n")
    result = run_pipeline(["--input", source, "--output", out, "--allow_other_files"])
    assert result.returncode == 2, result.stderr
    assert the_one_line(result.stderr).endswith(
        f"{out} holds {out}/errors-00000-of-00001.jsonl, which no manifest of a run here names, under a name this "
        "run writes: move it away (if an earlier release of this pipeline left it, delete it), or choose another "
        "--output"
    )
    assert (out / "errors-00000-of-00001.jsonl").read_text() == "my own error log\n"
