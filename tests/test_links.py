"""No write follows a link; no read leaves the dataset.

Symbolic links planted in DEST or ROOT under the names a run writes, renames or deletes (temporary
files, run folders, version folders, dataset files) point at a victim outside: whatever is planted,
the victim keeps every byte, a planted folder link is left alone (and reported), and the run ends
as it would without it. A manifest naming a file outside its folder is refused by every reader.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.contract.layout import MANIFEST_NAME
from core.contract.manifest import ManifestError, read_manifest
from core.storage import text_reader
from pipeline.cli import main
from tests.test_publication import photos, whole_dataset

# Names a run writes, renames, lists or deletes in DEST (the lease's and manifest's temporaries,
# older versions' temporary names among them) and in a refresh ROOT.
DEST_FILES = (
    ".lease.tmp",
    "manifest.json.tmp",
    ".manifest.json.a1b2c3.tmp",
    "manifest.rejected.json",
    "errors-00000-of-00001.jsonl",
    "train-00000-of-00002.tfrecord.gz",
)
DEST_FOLDERS = (".staging-20250101T000000000000Z-0badc0de", "beam-temp-train-123", ".shard-parts")
ROOT_FILES = ("LATEST.tmp", ".LATEST.a1b2c3.tmp", ".lease.tmp")
ROOT_FOLDERS = ("20250101T000000Z", "20990101T000000000000Z")


@pytest.fixture(scope="module")
def victim(tmp_path_factory):
    """A file and a folder outside every output, which no run may change."""
    base = tmp_path_factory.mktemp("victim")
    (base / "secret.txt").write_text("not yours\n")
    (base / "folder").mkdir()
    (base / "folder" / "keep.txt").write_text("keep me\n")
    return base


def snapshot(base: pathlib.Path) -> dict:
    return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return photos(tmp_path_factory.mktemp("src"), 1)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.sets(st.sampled_from(DEST_FILES), max_size=3),
    folders=st.sets(st.sampled_from(DEST_FOLDERS), max_size=2),
    overwrite=st.booleans(),
)
def test_links_planted_in_dest_never_lead_a_write_out(victim, source, tmp_path_factory, files, folders, overwrite):
    before = snapshot(victim)
    out = tmp_path_factory.mktemp("dest") / "out"
    if overwrite:
        assert main(["--input", str(source), "--output", str(out)]) == 0
    else:
        out.mkdir()
    for name in files:  # a committed file of that name is replaced by the link
        (out / name).unlink(missing_ok=True)
        (out / name).symlink_to(victim / "secret.txt")
    for name in folders:
        (out / name).symlink_to(victim / "folder", target_is_directory=True)
    users = any(not name.startswith(".") for name in files | folders)
    code = main(["--input", str(source), "--output", str(out), *(["--overwrite"] if overwrite else [])])
    assert snapshot(victim) == before, "a write or delete went through a planted link"
    # A visible name no manifest names is the user's, whatever its name: refused without a dataset there.
    assert code == (2 if users and not overwrite else 0)
    if code == 0:
        whole_dataset(out)
    for name in folders:
        assert (out / name).is_symlink(), "a planted folder link is left alone"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.sets(st.sampled_from(ROOT_FILES), max_size=2),
    folders=st.sets(st.sampled_from(ROOT_FOLDERS), max_size=2),
)
def test_links_planted_in_a_refresh_root_never_lead_a_write_out(victim, source, tmp_path_factory, files, folders):
    before = snapshot(victim)
    root = tmp_path_factory.mktemp("root") / "root"
    assert main(["refresh", "--input", str(source), "--output", str(root), "--keep", "1"]) == 0
    for name in files:
        (root / name).symlink_to(victim / "secret.txt")
    for name in folders:
        (root / name).symlink_to(victim / "folder", target_is_directory=True)
    first = sorted((source / "circle").iterdir())[0]
    (source / "circle" / "extra.jpg").write_bytes(first.read_bytes())
    try:
        assert main(["refresh", "--input", str(source), "--output", str(root), "--keep", "1"]) == 0
    finally:
        (source / "circle" / "extra.jpg").unlink()
    assert snapshot(victim) == before, "a write or delete went through a planted link"
    latest = (root / "LATEST").read_text().strip()
    assert whole_dataset(root / latest).counts.written == 4
    for name in folders:
        assert (root / name).is_symlink(), "a planted version folder link is left alone"


def test_a_link_planted_as_the_runs_own_folder_stops_it(tmp_path, victim, source, monkeypatch):
    """A run's own folder is made new: a link already under its name stops the run (exit 2)."""
    before = snapshot(victim)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr("pipeline.commands.convert.new_run", lambda: "planted")
    (out / ".staging-planted").symlink_to(victim / "folder", target_is_directory=True)
    assert main(["--input", str(source), "--output", str(out)]) == 2
    assert snapshot(victim) == before and (out / ".staging-planted").is_symlink()


_ESCAPES = st.sampled_from(
    ["../x", "../../etc/passwd", "/etc/passwd", "a/../../x", "gs://elsewhere/x", "..", "a\\..\\x"]
)
_FIELDS = st.sampled_from(["shards", "index_files", "error_files", "copies_files", "metadata_files"])


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, source):
    out = tmp_path_factory.mktemp("dataset") / "out"
    assert main(["--input", str(source), "--output", str(out), "--compression", "none", "--index"]) == 0
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_ESCAPES, field=_FIELDS)
def test_every_reader_refuses_a_manifest_naming_a_file_outside_its_folder(
    dataset, tmp_path_factory, capsys, name, field
):
    out = tmp_path_factory.mktemp("escape") / "out"
    shutil.copytree(dataset, out, copy_function=os.link)
    (out / MANIFEST_NAME).unlink()
    body = json.loads((dataset / MANIFEST_NAME).read_text())
    if field in ("shards", "index_files"):
        body["splits"]["train"][field] = [name, *body["splits"]["train"][field][1:]]
    else:
        body[field] = [name]
    (out / MANIFEST_NAME).write_text(json.dumps(body))
    with pytest.raises(ManifestError, match="is not a file name inside the folder"):
        read_manifest(str(out), text_reader(str(out)))
    for inspect in (["inspect", str(out)], ["inspect", str(out), "--verify"]):
        assert main(inspect) == 2
        assert "is not a file name inside the folder" in capsys.readouterr().err


def test_the_trainer_refuses_a_manifest_naming_a_file_outside_its_folder(dataset, tmp_path):
    from trainer.errors import IncompleteManifestError
    from trainer.manifest_io import load_manifest

    out = tmp_path / "out"
    out.mkdir()
    body = json.loads((dataset / MANIFEST_NAME).read_text())
    body["splits"]["train"]["shards"] = ["../../x"]
    (out / MANIFEST_NAME).write_text(json.dumps(body))
    with pytest.raises(IncompleteManifestError, match="is not a file name inside the folder"):
        load_manifest(str(out))
