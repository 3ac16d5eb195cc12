"""Every local file the user or a manifest names is opened by one opener,
core.local_files.open_regular: it refuses what is not a regular file (a FIFO, a device, a socket)
without waiting, and, inside a dataset's folder (or a refresh root), a link that leads out of it.

The scan: no module of core/, pipeline/, transforms/ or trainer/ opens a file by its name any
other way (a bare open, os.open, a gzip or zip archive, Beam's FileSystems.open, pathlib's
read_text, tf.io.gfile, tf.data or array_record reading a path) but the places ALLOWED names,
each for its reason; and every read through the opener or core.storage says which folder the
file must lie in (`inside=`, None for an input read as the user).

The generated cases: a dataset (and a refresh root) whose members (manifest, shards, index
files, error report, LATEST, a version folder, .lease) are replaced by FIFOs, links out of the
folder, links to /dev/zero, sockets, or links to another file inside it; every command that
reads the member, run as a process, ends in its time limit, refuses each kind but the link
inside, on a line naming the member and why (the refusal's, or a problem of --verify's, or the
summary's line of an error report it cannot read), and never reads the file outside.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import shutil
import socket
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.contract.layout import MANIFEST_NAME
from core.contract.versions import LATEST_NAME
from pipeline.lease import LEASE_NAME, Holder
from tests.code_scan import Call, calls, dotted, places
from tests.subprocess_limits import run_pipeline, run_trainer
from tests.test_code_map import PACKAGES
from tests.test_publication import photos

# Calls that open a file by its name, by the name they are made by, or by the method's name on
# anything but core.storage (pathlib's read_text, Image.open, gzip.open, FileSystems.open).
OPENING_CALLS = frozenset(
    {
        "open",
        "io.open",
        "os.open",
        "tf.io.gfile.GFile",
        "tf.io.gfile.exists",
        "tf.io.read_file",
        "tf.data.TFRecordDataset",
        "zipfile.ZipFile",
        "tarfile.open",
        "gzip.GzipFile",
        "np.load",
    }
)
OPENING_METHODS = frozenset({"open", "read_text", "read_bytes", "write_text", "write_bytes"})
OPENING_CLASSES = frozenset({"ArrayRecordReader", "ArrayRecordWriter"})  # array_record opens its path itself

# (module, function): why it may open a file itself.
ALLOWED = {
    ("core.local_files", "open_regular"): "the opener",
    ("core.local_writes", "create_new"): "creates a new file exclusively, never through a link (O_EXCL|O_NOFOLLOW)",
    ("core.local_writes", "create_exclusive"): "creates a new file exclusively, never through a link",
    ("core.storage", "open_binary"): "Beam's FileSystems.open, for gs:// only (no links, FIFOs or devices)",
    ("core.storage", "folder_lock"): "opens a folder for its flock (O_DIRECTORY: a FIFO fails at once)",
    ("core.array_record_files", "write_shard"): "reads the file it wrote in its own temporary folder",
    ("core.array_record_files", "_write_local"): "array_record writes a new file under a fresh temporary name",
    ("core.array_record_files", "read_records"): "array_record reads what _local_copy checked (check_regular) or made",
    ("core.array_record_files", "_local_copy"): "writes a gs:// shard's copy into its own temporary folder",
    ("core.contract.manifest", "json_schema"): "reads the package's own schema file",
    ("pipeline.portable_workers", "find_sdk_worker"): "reads /proc",
    ("pipeline.portable_workers", "_start_time"): "reads /proc",
    ("pipeline.runners", "available_memory"): "reads /proc/meminfo",
    ("transforms.part_appender", "processes_may_append"): "reads /proc/self/mounts",
    ("transforms.part_appender", "PartAppender.append"): "appends to a part this run made exclusively",
    ("transforms.shard_parts", "SharedParts.assign"): "makes a part of this run's exclusively (mode x)",
    ("transforms.shard_parts", "SharedParts.close"): "appends to a part this run made exclusively",
    ("transforms.tabular_spill", "_BucketWriter.write"): "makes a spill file of this run's exclusively (mode x)",
    ("transforms.tabular_spill", "_frames"): "reads a spill file this run made",
    ("transforms.tabular_spill", "permuted_rows"): "reads a spill file this run made",
    ("trainer.input_fn", "read_shard"): "tf.data reads shards manifest_io.shard_paths checked (check_regular)",
    ("trainer.manifest_io", "read_text"): "tf.io.gfile, for gs:// only",
    ("trainer.model_dir", "record"): "writes model.json into the model directory, the trainer's own output",
    ("trainer.loop", "TrainingLoop.export"): "writes the export into the model directory",
    ("trainer.loop", "TrainingLoop.write_summary"): "writes training_summary.json into the model directory",
}
# Reads that must say which folder their file lies in: the opener, core.storage's, the shard readers'.
READS_INSIDE = frozenset(
    {
        "open_regular",
        "check_regular",
        "storage.read_bytes",
        "storage.read_start",
        "storage.read_text",
        "storage.open_binary",
        "storage.open_text",
        "read_records",
        "read_framed_records",
        "read_shard",
        "read_array_records",
    }
)


def opens_by_name(call: Call) -> bool:
    """Whether `call` opens a file by its name (a stream or bytes in memory, `fileobj=` or
    `io.BytesIO(...)`, is no file)."""
    method = call.name.rsplit(".", 1)[-1]
    receiver = call.name.rpartition(".")[0]
    by_name = (
        call.name in OPENING_CALLS
        or method in OPENING_CLASSES
        or ("." in call.name and method in OPENING_METHODS and receiver != "storage")
    )
    if not by_name or call.keyword("fileobj") is not None:
        return False
    first = call.node.args[0] if call.node.args else None
    return not (isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) and first.func.attr == "BytesIO")


def test_no_module_opens_a_file_but_through_the_opener():
    found = {(c.module, c.function): c for c in calls() if opens_by_name(c)}
    bypasses = sorted(c.site for key, c in found.items() if key not in ALLOWED)
    assert not bypasses, "opened without core.local_files.open_regular:\n" + "\n".join(bypasses)
    stale = sorted(f"{m}.{f}" for m, f in ALLOWED if (m, f) not in found)
    assert not stale, f"allowed, but they open nothing: {stale}"


def test_every_read_says_which_folder_its_file_lies_in():
    unsaid = sorted(c.site for c in calls() if c.name in READS_INSIDE and c.keyword("inside") is None)
    assert not unsaid, "reads without inside= (None for an input):\n" + "\n".join(unsaid)
    # Handed over uncalled (a reader for core.contract's functions), it must be storage.text_reader(folder)
    # or a functools.partial naming inside=.
    handed = sorted(
        str(place)
        for place in places(PACKAGES)
        if isinstance(place.node, ast.Call)
        for arg in place.node.args
        if dotted(arg) in READS_INSIDE and dotted(place.node.func) not in ("functools.partial", "partial")
    )
    assert not handed, "a reader handed over without inside=:\n" + "\n".join(handed)


def test_the_scan_finds_each_kind_of_bypass():
    """The scan is not blind: each way of opening it forbids is found in a module written so."""
    code = (
        "def f(p, tf, Path, storage, io):\n"
        "    open(p); os.open(p, 0); Path(p).read_text(); p.read_bytes(); tf.io.gfile.GFile(p)\n"
        "    tf.data.TFRecordDataset(p); FileSystems.open(p); gzip.open(p); Image.open(p)\n"
        "    m.ArrayRecordReader(p); zipfile.ZipFile(p)\n"
        "    storage.read_text(p, inside=None); gzip.GzipFile(fileobj=p); Image.open(io.BytesIO(p))\n"
    )
    found = [
        c.name
        for c in (
            Call("m", "f", _dotted(node.func), node) for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)
        )
        if opens_by_name(c)
    ]
    assert sorted(found) == sorted(
        [
            "open",
            "os.open",
            ".read_text",
            "p.read_bytes",
            "tf.io.gfile.GFile",
            "tf.data.TFRecordDataset",
            "FileSystems.open",
            "gzip.open",
            "Image.open",
            "m.ArrayRecordReader",
            "zipfile.ZipFile",
        ]
    )


def _dotted(node):
    from tests.code_scan import dotted

    return dotted(node)


# --- generated cases: a dataset's members replaced


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Class folders with one file that is not an image, so the dataset has an error report."""
    src = photos(tmp_path_factory.mktemp("src"), 6)
    (src / "circle" / "broken.jpg").write_bytes(b"not an image")
    return src


@pytest.fixture(scope="module")
def dataset(sources):
    """A dataset with index files, in a short path (a socket's name is at most ~100 bytes)."""
    out = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="ds")) / "d"
    argv = ["--input", sources, "--output", out, "--compression", "none", "--index", "--max_error_fraction", "0.5"]
    result = run_pipeline(argv)
    assert result.returncode == 0, result.stderr
    yield out
    shutil.rmtree(out.parent)


def _members(dest: pathlib.Path) -> dict[str, str]:
    """A name of each kind of member of the dataset in `dest`, relative to it."""
    body = json.loads((dest / MANIFEST_NAME).read_text())
    train = body["splits"]["train"]
    return {
        "manifest": MANIFEST_NAME,
        "shard": train["shards"][0],
        "index": train["index_files"][0],
        "errors": body["error_files"][0],
        "lease": LEASE_NAME,
    }


# What reads each member: (command, how a refusal of it ends: exit code)
READERS = {
    "manifest": (("inspect", 2), ("verify", 2), ("train", 2), ("overwrite", 2)),
    "shard": (("verify", 1), ("train", 2)),
    "index": (("verify", 1),),
    "errors": (("inspect", 0), ("verify", 1)),
    "lease": (("overwrite", 2),),
    "latest": (("inspect", 2), ("train", 2), ("refresh", 2)),
    "version": (("inspect", 2), ("train", 2)),
}
KINDS = ("fifo", "link out", "dev zero", "socket", "link inside")
SAYS = {
    "fifo": "not a regular file: a FIFO",
    "link out": "through a link",
    "dev zero": "not a regular file: a link to /dev/zero, a character device",
    "socket": "not a regular file: a socket",
}


def _plant(path: pathlib.Path, kind: str, outside: pathlib.Path) -> None:
    """Replaces the file at `path` with `kind`; a link out leads to a copy of the file itself
    outside, so that a reader that followed it would find what it expects."""
    copy = outside / path.name
    if path.exists():
        shutil.copyfile(path, copy)
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link out":
        path.symlink_to(copy)
    elif kind == "dev zero":
        path.symlink_to("/dev/zero")
    elif kind == "socket":
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))  # bound, never listening: connecting fails, opening fails at once
    else:  # a link to a copy of the file inside the folder (hidden: no run's name): still the dataset's
        inside = path.parent / f".{path.name}.copy"
        shutil.copyfile(copy, inside)
        path.symlink_to(inside.name)


def _command(command: str, target: pathlib.Path, sources: pathlib.Path, tmp: pathlib.Path):
    if command == "train":
        model_dir = tmp / "model"
        argv = ["--data", target, "--model_dir", model_dir, "--epochs", "1", "--batch_size", "2", "--image_size", "8"]
        return run_trainer([*argv, "--train_crop", "none"])
    if command == "overwrite":
        return run_pipeline(["--input", sources, "--output", target, "--overwrite", "--max_error_fraction", "0.5"])
    if command == "refresh":
        return run_pipeline(["refresh", "--input", sources, "--output", target, "--max_error_fraction", "0.5"])
    return run_pipeline(["inspect", target, *(["--verify"] if command == "verify" else [])])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    member=st.sampled_from(sorted(READERS)),
    kind=st.sampled_from(KINDS),
    choice=st.integers(0, 3),
)
def test_every_reader_refuses_a_member_that_is_not_a_regular_file_inside_the_dataset(
    dataset, sources, member, kind, choice
):
    if member == "version" and kind != "link out":  # a version folder is a folder: only a link of it leads out
        kind = "link out"
    command, refused_with = READERS[member][choice % len(READERS[member])]
    tmp = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="m"))
    try:
        outside = tmp / "outside"
        outside.mkdir()
        if member in ("latest", "version"):
            target = tmp / "r"
            target.mkdir()
            shutil.copytree(dataset, target / "20250101T000000Z", copy_function=os.link)
            (target / LATEST_NAME).write_text("20250101T000000Z\n")
            if member == "version":
                shutil.move(target / "20250101T000000Z", outside / "20250101T000000Z")
                (target / "20250101T000000Z").symlink_to(outside / "20250101T000000Z", target_is_directory=True)
                planted = target / "20250101T000000Z" / MANIFEST_NAME
            else:
                planted = target / LATEST_NAME
                _plant(planted, kind, outside)
        else:
            target = tmp / "d"
            shutil.copytree(dataset, target, copy_function=shutil.copyfile)
            planted = target / _members(target)[member]
            if member == "lease":  # one a dead run left: taken over when it is a file
                planted.write_bytes(Holder("dead", "gone", 1, "", "2000-01-01T00:00:00+00:00").to_bytes())
            _plant(planted, kind, outside)
        result = _command(command, target, sources, tmp)
        said = result.stdout + result.stderr
        assert "Traceback" not in said, said
        if kind == "link inside":  # the dataset's own file: read as it would be
            assert result.returncode == 0, said
            return
        reason = "leads out of" if kind == "link out" else SAYS[kind]
        assert any(str(planted) in line and reason in line for line in said.splitlines()), said
        assert result.returncode == refused_with, said
    finally:
        shutil.rmtree(tmp)
