"""An --output (or a refresh ROOT) that holds files or folders of the user's is refused before any
work, in one line naming them and --allow_other_files, unless that is given; then the dataset is
written beside them and they stay as they were. What runs leave there (and hidden names, and a
committed dataset, which needs --overwrite) is no reason to refuse."""

from __future__ import annotations

import pathlib
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from tests.dataset_reader import load_manifest
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample"
# What runs leave in a convert output (files unless they end in "/"), and hidden names. Files named
# like a run's that no manifest names are the user's: tests/test_deletes.py.
LEFTOVERS = (
    ".staging-20250101T000000000000Z-ab12cd34/",
    ".shard-parts/",
    ".manifest.json.1a2b.tmp",
    ".gitkeep",
    ".DS_Store",
)
# ... and in a refresh ROOT.
ROOT_LEFTOVERS = ("20250101T000000Z/", "20250102T000000123456Z/", "LATEST.tmp", ".lease.9f.tmp", ".gitkeep")
_WORD = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10).filter(lambda w: w not in ("index", "_"))
USER_NAMES = st.builds(lambda word, end: word + end, _WORD, st.sampled_from(["", ".txt", ".docx", ".jpg", ".py", "/"]))


def _photos(folder: pathlib.Path) -> pathlib.Path:
    for label in ("circle", "square"):
        (folder / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:2]:
            shutil.copy(path, folder / label / path.name)
    return folder


def _make(folder: pathlib.Path, names) -> dict[str, bytes]:
    """`names` made below `folder` (a name ending in "/" a folder holding a file); {path: bytes} of
    every file made."""
    made = {}
    for name in names:
        path = folder / name.rstrip("/")
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            path = path / "inside.txt"
        path.write_bytes(name.encode())
        made[str(path)] = name.encode()
    return made


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    users=st.lists(USER_NAMES, max_size=8, unique_by=lambda n: n.rstrip("/")),
    ours=st.lists(st.sampled_from(LEFTOVERS), unique=True),
    root_ours=st.lists(st.sampled_from(ROOT_LEFTOVERS), unique=True),
    refresh=st.booleans(),
)
def test_an_output_of_the_users_files_is_refused_unless_allowed(caplog, users, ours, root_ours, refresh):
    ours = root_ours if refresh else ours
    assume(not {n.rstrip("/") for n in users} & {n.rstrip("/") for n in ours})
    with tempfile.TemporaryDirectory() as folder:
        root = pathlib.Path(folder)
        source, output = _photos(root / "photos"), root / "out"
        output.mkdir()
        _make(output, ours)
        theirs = _make(output, users)
        argv = [*(["refresh"] if refresh else []), "--input", str(source), "--output", str(output)]
        caplog.clear()
        code = main(argv)
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        if users:
            names = sorted(n.rstrip("/") for n in users)
            assert code == 2 and len(errors) == 1, caplog.text
            assert errors[0].startswith(f"output {output} holds {len(users)} file(s) or folder(s) "), errors
            assert repr(names[0]) in errors[0] and "pass --allow_other_files to write beside them" in errors[0]
            assert not any("planned" in r.getMessage() for r in caplog.records), "nothing may be read first"
            argv.append("--allow_other_files")
            caplog.clear()
            code = main(argv)
        assert code == 0, caplog.text
        assert all(pathlib.Path(path).read_bytes() == data for path, data in theirs.items())


def test_a_committed_dataset_beside_the_users_files_still_asks_for_overwrite(tmp_path, caplog):
    source = _photos(tmp_path / "photos")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "README.md").write_text("my notes")
    argv = ["--input", str(source), "--output", str(tmp_path / "out")]
    assert main([*argv, "--allow_other_files"]) == 0
    caplog.clear()
    assert main(argv) == 2
    assert "already holds a dataset" in caplog.text and "--overwrite" in caplog.text
    assert main([*argv, "--overwrite"]) == 0
    assert (tmp_path / "out" / "README.md").read_text() == "my notes"
    assert load_manifest(tmp_path / "out").counts.written == 4


@pytest.mark.parametrize("command", [[], ["refresh"]])
def test_the_users_files_in_the_output_are_named_in_one_line(tmp_path, command):
    source = _photos(tmp_path / "photos")
    output = tmp_path / "Documents"
    output.mkdir()
    _make(output, [f"note{i:02d}.txt" for i in range(12)] + ["thesis/"])
    result = run_pipeline([*command, "--input", source, "--output", output])
    assert result.returncode == 2
    line = the_one_line(result.stderr)
    names = "such as ['note00.txt', 'note01.txt', 'note02.txt', 'note03.txt', 'note04.txt']"
    assert line.endswith(
        f"output {output} holds 13 file(s) or folder(s) "
        + ("besides versions and LATEST" if command else "no conversion wrote")
        + f", {names}: "
        + ("a refresh root holds those only" if command else "a dataset written in among them would mix with them")
        + "; choose a new or empty folder for --output, or pass --allow_other_files to write beside them (they stay "
        "as they are)"
    ), line
    assert sorted(p.name for p in output.iterdir()) == [*(f"note{i:02d}.txt" for i in range(12)), "thesis"]
