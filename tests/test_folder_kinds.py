"""Folders (issue 47): what a folder is to this product (a dataset folder, a refresh ROOT, neither,
or a mix of the two) is decided in one place, core.contract.folders.folder_kind; a reader given a
folder reads the dataset dataset_folder says it holds (a ROOT's: the version LATEST names).

The scan below fails when a module of core/, pipeline/, transforms/ or trainer/ names LATEST or a
manifest's file name outside the chokepoint and the modules that write those files (EXCEPTIONS).
Beside it, generated folders of manifests, LATEST, versions, names of a version's shape that are no
time and other names, on real disk: what folder_kind says follows from the names alone, and
`convert` refuses a ROOT and `refresh` a dataset folder in one line (exit 2), as processes.
"""

from __future__ import annotations

import ast
import os
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import storage
from core.contract.folders import DATASET, MIX, NEITHER, ROOT, FolderKindError, dataset_folder, folder_kind
from core.contract.layout import MANIFEST_NAME, REJECTED_MANIFEST_NAME
from core.contract.versions import LATEST_NAME, is_run_version
from pipeline.preflight import PreflightError, check_folder_kind, check_output
from tests.code_scan import attribute_name, places, places_in
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline
from tests.test_publication import photos

NAMES = {"LATEST_NAME", "MANIFEST_NAME", "REJECTED_MANIFEST_NAME"}
SPELT = {LATEST_NAME, MANIFEST_NAME, REJECTED_MANIFEST_NAME}
CHOKEPOINT = "core.contract.folders"
# Where those names may be spelt, and why: by module (the modules that write the files), or by
# (module, function).
EXCEPTIONS = {
    CHOKEPOINT: "the chokepoint",
    "core.contract.layout": "defines the manifests' names",
    "core.contract.versions": "defines LATEST's name and parses what it holds",
    "core.contract.manifest": "reads the manifest of a folder its caller chose (through the chokepoint)",
    "pipeline.publish": "writes a run's manifest or rejected manifest",
    "pipeline.folder_store": "writes and commits a convert output's manifests",
    "pipeline.version_store": "writes a version's manifest and LATEST, and tells a version's state",
    ("pipeline.output", "_finish_commit"): "a staging folder's kept manifest (folder_store's layout)",
    ("pipeline.output", "_prepare"): "the names a run over a committed dataset writes",
    ("pipeline.report", "rejection_report"): "names the rejected manifest's path in a report",
}


def _spelt(node: ast.AST) -> bool:
    if isinstance(node, ast.Name | ast.Attribute):
        return attribute_name(node) in NAMES
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split("/")[-1] in SPELT


def found_outside(found) -> list[str]:
    return [
        str(place)
        for place in found
        if _spelt(place.node) and place.module not in EXCEPTIONS and (place.module, place.function) not in EXCEPTIONS
    ]


def test_no_module_reads_latest_or_a_manifest_by_its_name_but_through_folder_kind():
    assert found_outside(places(("core", "pipeline", "transforms", "trainer"))) == []


def test_every_exception_is_still_needed():
    used = {p.module for p in places(("core", "pipeline", "transforms", "trainer")) if _spelt(p.node)}
    used |= {(p.module, p.function) for p in places(("core", "pipeline", "transforms", "trainer")) if _spelt(p.node)}
    assert set(EXCEPTIONS) <= used


@pytest.mark.parametrize(
    "code",
    [
        "def f(root):\n    return storage.read_text(join(root, LATEST_NAME))",
        "def f(out):\n    return storage.exists(out + '/manifest.json')",
        "def f(names):\n    return layout.REJECTED_MANIFEST_NAME in names",
    ],
)
def test_the_scan_finds_a_read_by_name(code):
    assert found_outside(places_in("pipeline.somewhere", ast.parse(code))) == ["pipeline.somewhere:2 (in f)"]


# A folder's top-level names: the product's signs, versions that are times (to the second or the
# microsecond), names of a version's shape that are no time, and other names.
VERSIONS = st.sampled_from(["20250101T000000Z", "20250301T020000123456Z", "20260102T030405000001Z"])
NOT_TIMES = st.sampled_from(["20250230T000000Z", "20251301T000000123456Z", "20250101T250000Z"])
OTHERS = st.sampled_from(["data.csv", "cats", "notes.txt", "2025", "LATEST.bak"])
FOLDERS = st.fixed_dictionaries(
    {
        "manifests": st.sets(st.sampled_from([MANIFEST_NAME, REJECTED_MANIFEST_NAME])),
        "latest": st.none() | VERSIONS,
        "versions": st.sets(VERSIONS, max_size=2),
        "not_times": st.sets(NOT_TIMES, max_size=2),
        "others": st.sets(OTHERS, max_size=2),
    }
)


def make_folder(folder: pathlib.Path, names: dict) -> None:
    folder.mkdir(parents=True)
    for name in names["manifests"] | names["others"]:
        (folder / name).write_text("{}")
    for name in names["versions"] | names["not_times"] | ({names["latest"]} - {None}):
        (folder / name).mkdir(exist_ok=True)
    if names["latest"]:
        (folder / LATEST_NAME).write_text(names["latest"] + "\n")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=FOLDERS)
def test_what_a_folder_is_follows_from_its_names(tmp_path_factory, names):
    folder = tmp_path_factory.mktemp("f") / "out"
    make_folder(folder, names)
    found = folder_kind(str(folder), storage.text_reader(str(folder)), storage.children)
    versions = names["versions"] | ({names["latest"]} - {None})
    root = names["latest"] is not None or any(is_run_version(v) for v in versions)
    expected = MIX if root and names["manifests"] else ROOT if root else DATASET if names["manifests"] else NEITHER
    assert found.kind == expected, found
    assert set(found.not_versions) == names["not_times"] and not set(found.versions) & names["not_times"]
    assert (found.not_versions_line() is None) == (not names["not_times"])
    if expected in (DATASET, NEITHER):
        assert dataset_folder(str(folder), storage.text_reader(str(folder)), storage.children) == str(folder)
    elif expected == ROOT and names["latest"]:
        assert (
            dataset_folder(str(folder), storage.text_reader(str(folder)), storage.children)
            == f"{folder}/{names['latest']}"
        )
    else:
        with pytest.raises(FolderKindError, match=str(folder)):
            dataset_folder(str(folder), storage.text_reader(str(folder)), storage.children)
    for command, refused in (("convert", (ROOT, MIX)), ("refresh", (DATASET, MIX))):
        if expected in refused:
            with pytest.raises(PreflightError, match=f"{folder} is {expected}"):
                check_folder_kind(command, str(folder))
        else:
            check_folder_kind(command, str(folder))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return photos(tmp_path_factory.mktemp("in"), 3)


def test_convert_refuses_a_refresh_root_in_one_line(source, tmp_path):
    root = tmp_path / "root"
    make_folder(
        root,
        {
            "manifests": set(),
            "latest": "20250301T020000123456Z",
            "versions": set(),
            "not_times": set(),
            "others": set(),
        },
    )
    before = sorted(os.listdir(root))
    done = run_pipeline(["--input", source, "--output", root])
    assert done.returncode == 2
    line = the_one_line(done.stderr)
    assert f"{root} is a refresh root (it holds LATEST)" in line and "refresh" in line.split(";")[-1]
    assert sorted(os.listdir(root)) == before


def test_refresh_refuses_a_dataset_folder_in_one_line(source, tmp_path):
    out = tmp_path / "out"
    assert run_pipeline(["--input", source, "--output", out]).returncode == 0
    before = sorted(os.listdir(out))
    done = run_pipeline(["refresh", "--input", source, "--output", out])
    assert done.returncode == 2
    assert f"{out} is a dataset folder (it holds manifest.json)" in the_one_line(done.stderr)
    assert sorted(os.listdir(out)) == before


def test_a_refresh_says_in_one_warning_which_names_are_no_version_and_leaves_them(source, tmp_path):
    root = tmp_path / "root"
    for name in ("20250230T000000Z", "20251301T000000123456Z"):
        (root / name).mkdir(parents=True)
        (root / name / "keep.txt").write_text(name)
    done = run_pipeline(["refresh", "--input", source, "--output", root])
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stderr.splitlines() if "named like a version but no UTC time" in line]
    assert len(warned) == 1 and f"{root}/20250230T000000Z and 1 more" in warned[0], done.stderr
    assert (root / "20250230T000000Z" / "keep.txt").read_text() == "20250230T000000Z"
    assert (root / "20251301T000000123456Z" / "keep.txt").exists()
    assert run_pipeline(["refresh", "--input", source, "--output", root]).returncode == 0  # and again


@pytest.mark.parametrize("kind", ["images", "csv"])
def test_an_output_inside_the_input_is_judged_on_real_paths(tmp_path, kind):
    data = tmp_path / "data"
    (data / "cats").mkdir(parents=True)
    (tmp_path / "elsewhere").symlink_to(data)  # a link to the input: writing below it writes in the input
    given = f"{data}/*/*.csv" if kind == "csv" else str(data)
    with pytest.raises(PreflightError, match=f"links resolved: {data}/out in {data}"):
        check_output(kind, given, str(tmp_path / "elsewhere" / "out"))
    link_to_output = tmp_path / "out-link"
    link_to_output.symlink_to(data / "cats")
    with pytest.raises(PreflightError, match="inside the input"):
        check_output(kind, given, str(link_to_output))
    check_output(kind, given, str(tmp_path / "out"))
