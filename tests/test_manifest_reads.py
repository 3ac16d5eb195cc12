"""Every manifest read is checked against core/contract/manifest.schema.json before it is used: one
reader, core.contract.manifest.read_manifest (with read_committed_manifest, read_rejected_manifest
and Manifest.from_json below them), and a scan of the code that fails when a module parses a
manifest another way. Generated damage to real manifests (a key dropped, a value of another type,
values nested, huge numbers, unknown names, paths out of the folder) is refused by every reader
in one line naming the file and where the manifest differs from its schema (as `jsonschema`
finds it), never a Python error downstream; manifests of every format version this package wrote
still read."""

from __future__ import annotations

import copy
import functools
import json
import os
import pathlib
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import storage
from core.contract import manifest as contract
from core.contract.manifest import (
    Manifest,
    ManifestError,
    ManifestRejectedError,
    read_manifest,
)
from core.contract.versions import LatestPointerError
from pipeline.cli import main
from pipeline.commands.refresh import previous_manifest
from tests.code_scan import bypasses, users
from tests.core.test_manifest_schema import manifests  # noqa: F401  (a fixture: a real manifest of each kind)
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline, run_trainer
from tests.test_publication import photos

MANIFEST_TYPES = tuple(
    f"core.contract.manifest.{name}" for name in ("Manifest", "SplitInfo", "FeatureSpec", "Counts", "Listing")
)
# The modules that parse JSON (through core.contract.json_text, the one JSON reader), and what
# each reads: a manifest is parsed by core.contract.manifest alone.
JSON_READERS = {
    "core.contract.manifest": "manifests, and their schema",
    "pipeline.report": "error reports, for summaries",
    "pipeline.verify": "error reports, checked",
    "pipeline.lease": "lease files",
    "pipeline.runners": "--environment_config",
    "pipeline.shard_check": "its counting processes' answers",
    "pipeline.source_list": "a refresh version's sources file, and the runs it is sorted in",
    "trainer.model_dir": "model.json",
}


# --- the scan: one reader


def test_only_the_contract_parses_json_that_could_be_a_manifest():
    """To parse a manifest takes a JSON parser, and only core.contract.json_text parses JSON
    (tests/test_bounded_parsers.py); of its users, only the contract reads manifests. A module
    that starts to parse JSON must be named here, with what it reads."""
    assert users(["core.contract.json_text"]) == set(JSON_READERS)


def test_only_the_contract_makes_a_manifest_of_json():
    assert bypasses(["core.contract.manifest.Manifest.from_json"], {"core.contract.manifest"}) == []
    assert bypasses(["core.contract.manifest._parse"], {"core.contract.manifest"}) == []


def test_manifests_are_built_by_their_reader_and_by_the_run_that_writes_them():
    """Manifest(...) and its parts are made from JSON only in from_json; the run's publication
    (and the plan, its listing) make them from what the run did."""
    assert users(MANIFEST_TYPES[:-1], called=True) == {"pipeline.publish"}
    assert users(MANIFEST_TYPES[-1:], called=True) == {"pipeline.planning"}


def test_the_trainer_and_every_command_read_manifests_through_the_contract():
    readers = users(
        [
            f"core.contract.manifest.{name}"
            for name in ("read_manifest", "read_committed_manifest", "read_manifest_file")
        ],
        True,
    )
    assert {
        "trainer.manifest_io",
        "pipeline.commands.inspect",
        "pipeline.commands.refresh",
        "pipeline.folder_store",  # for pipeline.job and pipeline.output too
        "pipeline.ending",
    } <= readers


MUTANTS = [
    None,
    True,
    False,
    0,
    -1,
    7,
    1.5,
    -0.5,
    2**63,
    10**30,
    -(10**30),
    "",
    "x",
    "images",
    "GZIP",
    "array_record",
    "../x",
    "/etc/passwd",
    "a//b",
    "a\n\x1b[2J",
    "9999-12-31T00:00:00+00:00",
    [],
    {},
    [1],
    ["x"],
    {"a": 1},
    [[[[]]]],
]


def node_paths(value, path=()) -> list[tuple]:
    """The path of every value inside `value` (itself first)."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += node_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            found += node_paths(item, (*path, index))
    return found


@st.composite
def damaged(draw, body: dict) -> dict:
    """`body` with one to three changes, each somewhere in it: a key dropped, a value replaced by
    another (of any type, huge, unknown, a path out of the folder), nested in a list or object,
    or a key added."""
    body = copy.deepcopy(body)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(node_paths(body)))
        how = draw(st.sampled_from(["drop", "replace", "replace", "nest", "add"]))
        if not path:
            continue
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        key, value = path[-1], parent[path[-1]]
        mutant = copy.deepcopy(draw(st.sampled_from(MUTANTS)))  # a copy: the damage may change it later
        if how == "drop":
            del parent[key]
        elif how == "replace":
            parent[key] = mutant
        elif how == "nest":
            parent[key] = draw(st.sampled_from([[value], {"a": value}]))
        elif isinstance(value, dict):
            value[draw(st.sampled_from(["extra", "name", "Train", "a/b"]))] = mutant
        elif isinstance(value, list):
            value.append(mutant)
    return body


CASES = ["images", "images_rejected", "images_uncompressed_indexed", "images_array_record", "image_csv", "csv"]


# --- every reader refuses damage in one line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), case=st.sampled_from(CASES))
def test_every_reader_reads_a_damaged_manifest_or_refuses_it_in_one_line(manifests, capsys, data, case):  # noqa: F811
    """The contract's reader, inspect (with --verify too), the trainer's checks of its call and a
    refresh whose LATEST names the version: a value or the reader's own refusal, never a Python
    error from a value of the wrong shape."""
    from tests.trainer.conftest import args
    from trainer import train
    from trainer.errors import TrainerError

    name, body = manifests[case]
    body = data.draw(damaged(body))
    with tempfile.TemporaryDirectory() as folder:
        (pathlib.Path(folder) / name).write_text(json.dumps(body))
        refused = False
        try:
            read_manifest(folder, storage.text_reader(folder))
        except ManifestRejectedError:
            pass
        except ManifestError as e:
            assert str(e).startswith(f"{folder}/{name}: ") and "\n" not in str(e), str(e)
            refused = True
        code = main(["inspect", folder])
        err = capsys.readouterr().err
        assert "Traceback" not in err and code == (2 if refused else code in (0, 1) and code), (code, err)
        if refused:
            assert err.count("\n") == 1 and err.startswith(f"error: {folder}/{name}: "), err
            assert "\x1b" not in err and "\r" not in err
            assert main(["inspect", folder, "--verify"]) == 2
            assert capsys.readouterr().err == err
            root, version = os.path.split(folder)
            with pytest.raises(LatestPointerError) as stopped:
                previous_manifest(root, version)
            assert "\n" not in str(stopped.value) and str(stopped.value).startswith(f"{root}/LATEST names ")
        try:
            train.plan_job(args("--data", folder, "--model_dir", pathlib.Path(folder) / "model"))
        except TrainerError:
            pass  # its own refusal, which may quote a crafted manifest's reasons: printed escaped (test_printing)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("dataset") / "out"
    assert main(["--input", str(photos(out.parent / "photos", 3)), "--output", str(out), "--num_shards", "1"]) == 0
    return out


DROPPED = object()  # a key left out
WRONG_SHAPES = {  # damage that was a Python error downstream, or a file read outside the folder
    "splits": (("splits",), [], "$.splits: an array where an object belongs"),
    "counts": (("counts",), "x", "$.counts: a string where an object belongs"),
    "count": (("counts", "written"), "9", "$.counts.written: a string where an integer belongs"),
    "features": (("features",), {"a": 1}, "$.features.a: an integer where an object belongs"),
    "label_map": (("label_map",), "cat", "$.label_map: a string where an array belongs"),
    "shard": (
        ("splits", "train", "shards", 0),
        "../x",
        '$.splits.train.shards[0]: "../x" is not a file name inside the folder',
    ),
    "huge": (
        ("splits", "train", "records"),
        10**400,
        "$.splits.train.records: an integer of 401 digits is more than 9223372036854775807",
    ),
    "missing": (("splits", "train", "records"), DROPPED, "$.splits.train: lacks 'records'"),
}


def damage(dataset: pathlib.Path, folder: pathlib.Path, key: str) -> pathlib.Path:
    shutil.copytree(dataset, folder)
    body = json.loads((folder / "manifest.json").read_text())
    *path, last = WRONG_SHAPES[key][0]
    parent = functools.reduce(lambda value, step: value[step], path, body)
    if WRONG_SHAPES[key][1] is DROPPED:
        del parent[last]
    else:
        parent[last] = WRONG_SHAPES[key][1]
    (folder / "manifest.json").write_text(json.dumps(body))
    return folder


@pytest.mark.parametrize("key", WRONG_SHAPES)
def test_inspect_refuses_a_manifest_of_the_wrong_shape_in_one_line(dataset, tmp_path, key):
    data = damage(dataset, tmp_path / "data", key)
    for argv in (["inspect", data], ["inspect", data, "--verify"]):
        result = run_pipeline(argv)
        assert result.returncode == 2, result.stderr
        assert the_one_line(result.stderr) == (
            f"error: {data}/manifest.json: manifest is malformed: {WRONG_SHAPES[key][2]} (damaged, or not written by "
            "tfrecord-pipeline: convert the data again)"
        )


@pytest.mark.parametrize("key", ["splits", "count", "shard", "huge"])
def test_the_trainer_refuses_a_manifest_of_the_wrong_shape_in_one_line(dataset, tmp_path, key):
    data = damage(dataset, tmp_path / "data", key)
    result = run_trainer(["--data", data, "--model_dir", tmp_path / "model", "--epochs", "1"])
    assert result.returncode == 2, result.stderr
    assert the_one_line(result.stderr).endswith(
        f"{data}/manifest.json: manifest is malformed: {WRONG_SHAPES[key][2]} "
        "(damaged, or not written by tfrecord-pipeline: convert the data again)"
    )


def test_a_refresh_whose_latest_manifest_is_malformed_stops_in_one_line(dataset, tmp_path):
    """It would keep that version's label ids: without them a scheduled refresh could renumber every
    class unseen. Pointing LATEST elsewhere, or removing it, is the user's call."""
    root = tmp_path / "root"
    source = photos(tmp_path / "photos", 3)
    assert main(["refresh", "--input", str(source), "--output", str(root)]) == 0
    version = (root / "LATEST").read_text().strip()
    body = json.loads((root / version / "manifest.json").read_text())
    body["label_map"] = "cat"
    (root / version / "manifest.json").write_text(json.dumps(body))
    shutil.copy(next((source / "circle").iterdir()), source / "circle" / "new.jpg")
    result = run_pipeline(["refresh", "--input", source, "--output", root])
    assert result.returncode == 2, result.stderr
    assert the_one_line(result.stderr).endswith(
        f"ERROR pipeline.refresh: {root}/LATEST names version {version}, whose label ids a refresh keeps, but "
        f"{root}/{version}/manifest.json: manifest is malformed: $.label_map: a string where an array belongs "
        f"(damaged, or not written by tfrecord-pipeline: convert the data again); or point LATEST at a version that "
        f"reads (echo VERSION > {root}/LATEST), or remove {root}/LATEST to start afresh"
    )
    (root / "LATEST").unlink()
    assert main(["refresh", "--input", str(source), "--output", str(root)]) == 0


def test_a_conversion_over_a_malformed_committed_manifest_is_refused(dataset, tmp_path, caplog):
    """A manifest.json that does not read is no dataset this pipeline wrote: not replaced, even
    with --overwrite (pipeline.output), and said so in one line naming where it differs."""
    data = damage(dataset, tmp_path / "data", "counts")
    source = photos(tmp_path / "photos", 3)
    for overwrite in ([], ["--overwrite"]):
        caplog.clear()
        assert main(["--input", str(source), "--output", str(data), *overwrite]) == 2
        [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert line.startswith(
            f"{data}/manifest.json: manifest is malformed: $.counts: a string where an object belongs (damaged, or "
            "not written by tfrecord-pipeline: convert the data again): it is not a manifest this pipeline wrote"
        )


# --- older formats still read


def older(body: dict, version: int) -> dict:
    """`body` as a run of format `version` wrote it: without the keys later formats added."""
    added = {2: ("shard_lengths", "rejected"), 3: ("index_files", "metadata_files", "label_offset", "compression")}
    body = copy.deepcopy({**body, "format_version": version})
    for later in range(version + 1, 4):
        for key in added[later]:
            body.pop(key, None)
            for split in body["splits"].values():
                split.pop(key, None)
    for key in ("file_format", "array_record_options"):  # format 4's, left out where they are the defaults
        body.pop(key)
    return body


@pytest.mark.parametrize("version", [1, 2, 3])
def test_manifests_of_earlier_formats_still_read(manifests, version):  # noqa: F811
    body = older(manifests["images"][1], version)
    manifest = Manifest.from_json(json.dumps(body))
    assert manifest.counts == contract.Counts(**body["counts"]) and manifest.compression == "GZIP"
    for name, split in manifest.splits.items():
        assert split.shards == tuple(body["splits"][name]["shards"])
        assert split.shard_lengths == (() if version < 2 else tuple(body["splits"][name]["shard_lengths"]))


def test_format_4_reads_and_a_key_at_its_default_reads_as_left_out(manifests):  # noqa: F811
    assert Manifest.from_json(json.dumps(manifests["images_array_record"][1])).file_format == "array_record"
    body = {**manifests["images"][1], "package_version": "", "created": "", "run": "", "listing": None, "inputs": {}}
    manifest = Manifest.from_json(json.dumps(body))
    assert (manifest.listing, manifest.inputs, manifest.created) == (None, {}, "")
