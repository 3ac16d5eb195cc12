"""A refresh whose new version drifted from the one LATEST names is held: committed in its folder,
LATEST left where it is, exit 4 with each failed check (before -> after); an unchanged rerun stays
held; `refresh --promote VERSION` publishes it; a job nobody waits for fails. Real refreshes of real
files, read back by TensorFlow."""

from __future__ import annotations

import csv
import pathlib
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.contract.layout import STATISTICS_NAME
from core.contract.versions import LATEST_NAME
from pipeline.cli import main
from pipeline.lease import Lease
from pipeline.version_store import VersionHeld, VersionPublication, version_states
from tests.dataset_reader import load_manifest, read_split
from tests.subprocess_limits import run_pipeline
from tests.test_publication import photos


def _latest(root: pathlib.Path) -> str:
    return (root / LATEST_NAME).read_text().strip()


def _refresh(source, root, *extra) -> int:
    return main(["refresh", "--input", str(source), "--output", str(root), *map(str, extra)])


def test_a_refresh_that_lost_a_class_is_held_until_a_person_promotes_it(tmp_path):
    source, root = photos(tmp_path / "src", 4), tmp_path / "root"
    assert _refresh(source, root) == 0
    first = _latest(root)
    shutil.rmtree(source / "circle")

    held = run_pipeline(["refresh", "--input", source, "--output", root])

    assert held.returncode == 4, held.stderr[-3000:]
    [version] = set(version_states(str(root))) - {first}
    assert _latest(root) == first, "LATEST moved to a held version"
    manifest = load_manifest(root / version)
    assert manifest.previous_version == first
    assert "class 'circle': 4 records -> none (it disappeared)" in manifest.held
    assert "records: 12 -> 8 (down 33.3%, more than hold.records_drop 20%)" in manifest.held
    assert (
        f"held: LATEST was not moved to version {version}; {root}/LATEST stays at {first}. The drift checks it "
        f"failed against {first}:\n" in held.stdout
    )
    for line in manifest.held:
        assert f"  {line}\n" in held.stdout
    promote = f"python -m pipeline refresh --output {root} --promote {version}"
    assert promote in held.stdout
    assert sum(len(read_split(root / version, split)) for split in manifest.splits) == 8  # committed whole

    again = run_pipeline(["refresh", "--input", source, "--output", root])
    assert again.returncode == 4 and "Nothing changed since the last refresh, whose version is held." in again.stdout
    assert set(version_states(str(root))) == {first, version} and _latest(root) == first

    shown = run_pipeline(["inspect", root])  # follows LATEST, and says a newer version waits
    assert f"{root} also holds version {version}, newer, held: python -m pipeline inspect {root}/{version}" in (
        shown.stdout
    )

    promoted = run_pipeline(promote.split()[3:])
    assert promoted.returncode == 0, promoted.stderr[-3000:]
    assert f"Promoted version {version}: {root}/LATEST -> {version} (was {first})" in promoted.stdout
    assert _latest(root) == version
    assert _refresh(source, root) == 0 and set(version_states(str(root))) == {first, version}


def test_promote_refuses_what_is_no_committed_version(tmp_path, caplog):
    source, root = photos(tmp_path / "src", 2), tmp_path / "root"
    assert _refresh(source, root) == 0
    (root / "20990101T000000000000Z").mkdir()  # a folder without a manifest
    for name in ("20990101T000000000000Z", "last-week", "../src"):
        caplog.clear()
        assert main(["refresh", "--output", str(root), "--promote", name]) == 2
        assert "cannot promote" in caplog.text
    assert _latest(root) != "20990101T000000000000Z"


def test_held_checks_can_be_turned_off(tmp_path):
    source, root = photos(tmp_path / "src", 4), tmp_path / "root"
    settings_file = tmp_path / "no_hold.yaml"
    settings_file.write_text("hold:\n  enabled: false\n")
    assert _refresh(source, root) == 0
    shutil.rmtree(source / "circle")
    assert _refresh(source, root, "--config", settings_file) == 0
    assert not load_manifest(root / _latest(root)).held


def _table(path: pathlib.Path, rows: int, shift: float, count_as_text: bool) -> pathlib.Path:
    rng = random.Random(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["x", "count", "label"])
        for i in range(rows):
            count = f"n{i % 7}" if count_as_text else i % 7
            out.writerow([round(rng.random() + shift, 4), count, rng.choice(["a", "b"])])
    return path


@pytest.mark.parametrize(
    ("shift", "count_as_text", "expected"),
    [
        (0.0, True, "column 'count': int64 -> string (its type changed)"),
        (3.0, False, "column 'x' in train: median "),
    ],
)
def test_a_table_whose_column_was_retyped_or_moved_is_held(tmp_path, shift, count_as_text, expected):
    table, root = tmp_path / "src" / "part-0.csv", tmp_path / "root"
    _table(table, 1200, 0.0, False)
    assert _refresh(table, root, "--kind", "csv", "--label", "label") == 0
    _table(table, 1200, shift, count_as_text)
    assert _refresh(table, root, "--kind", "csv", "--label", "label") == 4
    [held] = [v for v in version_states(str(root)) if v != _latest(root)]
    lines = load_manifest(root / held).held
    assert any(line.startswith(expected) for line in lines), lines


def _held(tmp_path: pathlib.Path, gone: str) -> tuple[pathlib.Path, str, str]:
    """A ROOT of 12 photos whose refresh without class `gone` was held: the root, LATEST's version
    and the held one."""
    source, root = photos(tmp_path / "src", 4), tmp_path / "root"
    assert _refresh(source, root) == 0
    first = _latest(root)
    shutil.rmtree(source / gone)
    assert _refresh(source, root) == 4
    [held] = set(version_states(str(root))) - {first}
    return root, first, held


def test_a_job_nobody_waits_for_fails_when_its_version_is_held(tmp_path):
    """A template's job: no launcher reports the hold, so the job fails (alerting on failed jobs
    sees it), after committing the version; LATEST stays."""
    root, first, made = _held(tmp_path, "circle")
    manifest = load_manifest(root / made)
    statistics = (root / made / STATISTICS_NAME).read_bytes()

    version = "20990101T000000000000Z"
    shutil.copytree(root / made, root / version)
    (root / version / "manifest.json").unlink()
    publication = VersionPublication(str(root), version, "r3", unattended=True, previous=first)
    Lease(str(root), "r3").acquire()  # as the job takes it (pipeline.job_lease)
    with pytest.raises(VersionHeld, match=f"LATEST stays at {first}.*class 'circle'"):
        publication.publish(manifest, {STATISTICS_NAME: statistics})
    assert load_manifest(root / version).held == manifest.held and _latest(root) == first


def test_a_held_version_is_not_removed_by_its_runs_clean_up(tmp_path):
    root, _, held = _held(tmp_path, "square")
    run = load_manifest(root / held).run
    before = sorted(p.name for p in (root / held).iterdir())
    assert VersionPublication(str(root), held, run).clean_up_failed() is None
    assert sorted(p.name for p in (root / held).iterdir()) == before


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kept=st.integers(1, 4), removed=st.integers(0, 4))
def test_a_refresh_is_held_exactly_when_more_than_the_allowed_share_of_records_went(tmp_path_factory, kept, removed):
    """Records down by more than hold.records_drop (20%), and nothing else drifting: sources are
    taken from every class alike, so the label distribution keeps its shape."""
    base = tmp_path_factory.mktemp("drop")
    source, root = photos(base / "src", 4), base / "root"
    assert _refresh(source, root) == 0
    gone = 0
    for folder in sorted(source.iterdir()):
        for path in sorted(folder.iterdir())[kept : kept + removed]:
            path.unlink()
            gone += 1
    code = _refresh(source, root)
    before, after = 12, 12 - gone
    assert code == (4 if (before - after) / before > 0.2 else 0)


def test_a_template_launch_that_finds_its_version_still_held_stages_a_job_that_fails():
    """The launcher stages a one-step job (a Flex Template launch needs one); while the version it
    skips is held, that job fails, so alerting on failed jobs keeps seeing it."""
    from pipeline.commands.refresh import unchanged_job

    with pytest.raises(Exception, match="version 20990101T000000000000Z is held"):
        unchanged_job([], "version 20990101T000000000000Z is held", still_held=True).run().wait_until_finish()
    unchanged_job([], "nothing changed").run().wait_until_finish()  # an unchanged input's job passes


def test_a_held_refresh_on_dataflow_fails_its_job_and_its_launcher_exits_4(tmp_path, monkeypatch, caplog, capsys):
    """On Dataflow a held version fails the job (alerting on failed jobs sees it) once it is
    committed; the launcher that waits finds it held and exits 4, keeping it. The runner is told by
    its name (pipeline.runners.runner_of); the job itself runs here, on the DirectRunner."""
    from pipeline.commands import refresh as refresh_command

    source, root = photos(tmp_path / "src", 4), tmp_path / "root"
    assert _refresh(source, root) == 0
    first = _latest(root)
    shutil.rmtree(source / "circle")
    monkeypatch.setattr(refresh_command, "runner_of", lambda beam_args: "DataflowRunner")
    capsys.readouterr()
    assert _refresh(source, root) == 4
    failed = [r for r in caplog.records if r.levelname == "ERROR" and "it drifted: " in r.getMessage()]
    assert failed, "the job did not fail"
    [held] = set(version_states(str(root))) - {first}
    assert (
        _latest(root) == first
        and "class 'circle': 4 records -> none (it disappeared)" in load_manifest(root / held).held
    )
    assert f"held: LATEST was not moved to version {held}" in capsys.readouterr().out
