"""Ending (issue 47): every way a run ends (success, rejection, failure, Ctrl-C, SIGTERM, a lost
lease, a failure after its commit point) leaves DEST as its last line says, read from DEST as the
run ends (pipeline.ending). SIGTERM ends a run as Ctrl-C does, with exit 143: what it wrote goes,
its lease is released, and a scheduler's retry right after it is not refused.

The chokepoint is pipeline.ending.end, through which pipeline.cli.run returns every command's code;
the scan below fails when a module ends the process another way (sys.exit, os._exit, SystemExit)
or handles SIGTERM itself, outside EXCEPTIONS, or when cli.run returns a code `end` did not give.
Beside it, real processes sent SIGTERM (and Ctrl-C) at points of the run that hypothesis picks,
over no dataset or an earlier one, and failures injected after the commit point.
"""

from __future__ import annotations

import ast
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import storage
from core.contract.layout import MANIFEST_NAME, STAGING_PREFIX
from core.contract.versions import LATEST_NAME, is_version
from pipeline.cli import main
from pipeline.folder_store import referenced
from pipeline.readback import CountShardRecords
from tests.code_scan import attribute_name, places, places_in, receiver, tree
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from tests.test_publication import (
    REPO,
    _run_kill_at,
    convert_argv,
    download_tree,
    killed_at,
    photos,
    run_files,
    whole_dataset,
    write_lease,
)

# --- the scan

ENDS = {"exit", "_exit", "SystemExit", "abort"}  # sys.exit, os._exit, raise SystemExit, os.abort
# Where the process may end other than by returning from pipeline.cli.run, and why.
EXCEPTIONS = {
    ("pipeline.cli", "exit_with_main"): "the process' entry: exits with main's code, which `end` gave",
    ("pipeline.__main__", "main"): "a package missing before anything is imported: one line, exit 2 (refused)",
    ("pipeline.dataflow.__main__", ""): "exits with pipeline.cli.run's code, which `end` gave",
    ("transforms.convert_pool", ""): "a converting process, not the command: it ends itself, without teardown",
    ("pipeline.flags", "OneLineParser.error"): "a mistake in the flags: one line, exit 2 (refused), before any work",
    ("pipeline.ending", "terminations_end_the_run"): "the chokepoint's SIGTERM handler",
    ("pipeline.runners", "interrupts_stop_the_run"): "Ctrl-C raises the stop flag before its KeyboardInterrupt",
    ("pipeline.lease", "_interrupts_held_back"): "Ctrl-C and SIGTERM wait for the lease's removal, then end the run",
}


def _ends(node: ast.AST) -> str | None:
    """How a node ends the process or handles a signal, or None."""
    if isinstance(node, ast.Call) and attribute_name(node.func) in ENDS:
        return f"{receiver(node.func) or ''}.{attribute_name(node.func)}"
    if isinstance(node, ast.Raise) and node.exc is not None and attribute_name(node.exc) == "SystemExit":
        return "raise SystemExit"  # without arguments (with them, the call above)
    if isinstance(node, ast.Call) and attribute_name(node.func) == "signal" and receiver(node.func) == "signal":
        return "signal.signal"
    return None


def ends_outside(found) -> list[str]:
    return [
        f"{place}: {_ends(place.node)}"
        for place in found
        if _ends(place.node) and (place.module, place.function) not in EXCEPTIONS
    ]


def test_no_module_ends_the_process_or_handles_a_signal_but_through_the_ending():
    assert ends_outside(places(("core", "pipeline", "transforms"))) == []


def test_every_exception_is_still_needed():
    used = {(p.module, p.function) for p in places(("core", "pipeline", "transforms")) if _ends(p.node)}
    assert set(EXCEPTIONS) == used


def test_every_code_the_cli_returns_is_ends():
    [run] = [n for n in ast.walk(tree("pipeline.cli")) if isinstance(n, ast.FunctionDef) and n.name == "run"]
    returns = [n for n in ast.walk(run) if isinstance(n, ast.Return)]
    assert returns and all(isinstance(r.value, ast.Call) and attribute_name(r.value.func) == "end" for r in returns)


@pytest.mark.parametrize(
    "code",
    [
        "def f():\n    sys.exit(3)",
        "def f():\n    os._exit(1)",
        "def f():\n    raise SystemExit(130)",
        "def f(h):\n    signal.signal(signal.SIGTERM, h)",
    ],
)
def test_the_scan_finds_another_ending(code):
    assert len(ends_outside(places_in("pipeline.somewhere", ast.parse(code)))) == 1


# --- runs ended by a signal, as processes

# Points of a run, as kill_at targets: before the job, while reading, while reading back what it
# wrote, as it commits, once it committed, and as it removes its lease, its last step.
POINTS = (
    ("pipeline.folder_store:FolderPublication.prepare", 1),
    ("transforms.images:ReadImages.process", 1),
    ("pipeline.readback:CountShardRecords.process", 1),
    ("pipeline.folder_store:move_in", 1),
    ("pipeline.job:_committed", 1),
    ("core.storage:delete_if_unchanged", 1),
)
SIGNALS = {"--terminate": 143, "--interrupt": 130}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return photos(tmp_path_factory.mktemp("in"), 2)


@pytest.fixture(scope="module")
def earlier(source, tmp_path_factory):
    """An output holding a committed dataset, to copy."""
    out = tmp_path_factory.mktemp("earlier") / "out"
    assert main(convert_argv(source, out)) == 0
    return out


def last_line_is_true(out: pathlib.Path, stderr: str, run_before: str | None) -> str:
    """The one ERROR line of a run that a signal ended, checked against what DEST holds: its new
    dataset, whole (and only it), the previous one, unchanged, or none; never a lease or a run's
    folder left behind."""
    errors = [line for line in stderr.splitlines() if " ERROR " in line or "Traceback" in line]
    assert len(errors) == 1 and stderr.rstrip().endswith(errors[0].rstrip()), stderr[-3000:]
    line = errors[0]
    if "only after the run committed" in line:
        manifest = whole_dataset(out)
        assert manifest.run != run_before and f"{out} holds its new dataset, whole" in line, line
        assert f"run {manifest.run}" in line
        assert sorted(p.name for p in out.iterdir()) == sorted(referenced(manifest)), line
    elif run_before is not None:
        assert f"the previous dataset in {out} is unchanged" in line, line
        assert whole_dataset(out).run == run_before
    else:
        assert f"{out} holds no dataset" in line, line
        assert not out.exists() or sorted(p.name for p in out.iterdir()) == [], line
    assert not out.exists() or run_files(out) == [], "no lease or staging folder is left"
    return line


def signalled(mode: str, target: str, nth: int, argv: list[str]) -> subprocess.CompletedProcess:
    done = _run_kill_at([mode, target, str(nth)], argv)
    assert "kill_at:" in done.stderr, done.stderr[-3000:]  # the run reached the point
    return done


@pytest.mark.parametrize("target, nth", POINTS)
def test_sigterm_at_any_point_exits_143_says_what_dest_holds_and_a_retry_runs(source, tmp_path, target, nth):
    out = tmp_path / "out"
    done = signalled("--terminate", target, nth, convert_argv(source, out))
    assert done.returncode == 143, done.stderr[-3000:]
    line = last_line_is_true(out, done.stderr, None)
    assert line.split(" ERROR ")[-1].split(": ", 1)[1].startswith("terminated (SIGTERM)"), line
    retry = subprocess.run(
        [sys.executable, "-m", "pipeline", *convert_argv(source, out, "--overwrite")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert retry.returncode == 0, retry.stderr[-3000:]  # not refused by the terminated run's lease
    whole_dataset(out)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(point=st.sampled_from(POINTS), mode=st.sampled_from(sorted(SIGNALS)), over_a_dataset=st.booleans())
def test_a_run_a_signal_ends_anywhere_leaves_dest_as_its_last_line_says(
    source, earlier, tmp_path_factory, point, mode, over_a_dataset
):
    out = tmp_path_factory.mktemp("run") / "out"
    before = None
    if over_a_dataset:
        shutil.copytree(earlier, out)
        before = whole_dataset(out).run
    done = signalled(mode, *point, convert_argv(source, out, *(["--overwrite"] if over_a_dataset else [])))
    assert done.returncode == SIGNALS[mode], done.stderr[-3000:]
    last_line_is_true(out, done.stderr, before)


def test_sigterm_from_outside_while_reading_ends_the_run_within_seconds(tmp_path):
    """As a scheduler sends it: to the process, from another process, at any moment."""
    source, out = photos(tmp_path / "src", 30), tmp_path / "out"
    config = tmp_path / "config.yaml"
    config.write_text("image: {local_processes: 2, read_batch: 1}\n")
    argv = [sys.executable, "-m", "pipeline", *convert_argv(source, out, "--config", config)]
    run = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True)
    log = []
    for line in run.stderr:
        log.append(line)
        if "reading images in" in line:
            run.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            break
    log += run.stderr.readlines()
    code = run.wait(timeout=SUBPROCESS_TIMEOUT)
    assert time.monotonic() - sent < 15, "".join(log)
    if code == 0:  # it finished first
        whole_dataset(out)
        return
    assert code == 143, "".join(log)
    last_line_is_true(out, "".join(log), None)


def test_a_refresh_terminated_keeps_latest_removes_its_version_and_a_retry_publishes(source, tmp_path):
    root = tmp_path / "root"
    argv = ["refresh", "--input", str(source), "--output", str(root)]
    assert main(argv) == 0
    v1 = (root / LATEST_NAME).read_text().strip()
    (source / "circle" / "extra.jpg").write_bytes((next((source / "circle").iterdir())).read_bytes())
    try:
        done = signalled("--terminate", "transforms.images:ReadImages.process", 1, argv)
        assert done.returncode == 143, done.stderr[-3000:]
        errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
        assert len(errors) == 1 and f"{root}/LATEST still names {v1}" in errors[0], done.stderr[-3000:]
        assert sorted(p.name for p in root.iterdir()) == sorted([LATEST_NAME, v1]), "its version and its lease are gone"
        assert main(argv) == 0
        assert (root / LATEST_NAME).read_text().strip() != v1
    finally:
        (source / "circle" / "extra.jpg").unlink()


# --- failures after the commit point, and a lost lease


def test_a_failure_once_the_run_committed_says_dest_holds_its_dataset(source, tmp_path, monkeypatch, caplog):
    import pipeline.job

    def fail(output, publication):
        raise OSError(f"lost the connection reading back {output}")

    monkeypatch.setattr(pipeline.job, "_committed", fail)
    out = tmp_path / "out"
    assert main(convert_argv(source, out)) == 3
    manifest = whole_dataset(out)
    last = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"][-1]
    assert ", only after the run committed: " in last and f"{out} holds its new dataset, whole" in last
    assert f"run {manifest.run}" in last and "unchanged" not in last and "no dataset" not in last
    assert sorted(p.name for p in out.iterdir()) == sorted(referenced(manifest))


def test_a_commit_that_fails_between_its_steps_is_finished_and_says_so(earlier, source, tmp_path, monkeypatch, caplog):
    """Over a dataset, manifest.json names the staged files first (folder_store); a copy that fails
    on the job's threads after that is finished by the run's clean-up: manifest.json never stays
    naming a staging folder, and the last line says the new dataset is there."""
    out = tmp_path / "out"
    shutil.copytree(earlier, out)
    old = whole_dataset(out).run
    copy, failed = storage.commit_copy, []

    def fails_on_the_jobs_threads(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            failed.append(args)
            raise OSError("the disk went away for a moment")
        return copy(*args, **kwargs)

    monkeypatch.setattr(storage, "commit_copy", fails_on_the_jobs_threads)
    code = main(convert_argv(source, out, "--overwrite"))
    assert failed, "the copy was made on the job's threads"
    assert code == 3
    manifest = whole_dataset(out)
    assert manifest.run != old and not any(name.startswith(STAGING_PREFIX) for name in referenced(manifest))
    last = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"][-1]
    assert ", only after the run committed: " in last and f"{out} holds its new dataset, whole" in last
    assert run_files(out) == []


def test_a_run_that_lost_its_lease_says_whose_dataset_dest_holds(earlier, source, tmp_path, monkeypatch, caplog):
    out = tmp_path / "out"
    other = whole_dataset(earlier)
    count = CountShardRecords.process

    def taken_over_and_committed_meanwhile(self, path):
        write_lease(out, "elsewhere", 1, 600)
        for name in referenced(other):
            shutil.copy(earlier / name, out / name)
        yield from count(self, path)

    monkeypatch.setattr(CountShardRecords, "process", taken_over_and_committed_meanwhile)
    assert main(convert_argv(source, out)) == 3
    assert whole_dataset(out).run == other.run
    last = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"][-1]
    assert f"{out} holds the dataset of run {other.run}" in last and "holds no dataset" not in last, last


def test_an_unchanged_refresh_removes_the_version_a_killed_run_left(source, tmp_path):
    root = tmp_path / "root"
    argv = ["refresh", "--input", str(source), "--output", str(root)]
    assert main(argv) == 0
    v1 = (root / LATEST_NAME).read_text().strip()
    user = root / "20240101T000000Z"  # a version to the second without a manifest: an older release's, left
    user.mkdir()
    extra = source / "circle" / "extra.jpg"
    extra.write_bytes(next((source / "circle").iterdir()).read_bytes())
    try:
        killed_at("transforms.images:ReadImages.process", 1, argv)
    finally:
        extra.unlink()
    [dead] = [p.name for p in root.iterdir() if is_version(p.name) and p.name not in (v1, user.name)]
    assert not (root / dead / MANIFEST_NAME).exists()
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *argv], cwd=REPO, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
    )
    assert done.returncode == 0 and "nothing changed" in done.stdout, done.stderr[-3000:]
    assert f"removed version folder(s) {dead}" in done.stderr
    assert sorted(p.name for p in root.iterdir()) == sorted([LATEST_NAME, v1, user.name])


# --- on gs://, where the lease and the commit are objects


def test_on_gcs_a_failure_once_the_run_committed_says_dest_holds_its_dataset(
    gcs_emulator, gcs_bucket, source, tmp_path, monkeypatch, caplog
):
    import pipeline.job

    def fail(output, publication):
        raise OSError(f"lost the connection reading back {output}")

    monkeypatch.setattr(pipeline.job, "_committed", fail)
    out = f"gs://{gcs_bucket}/out"
    assert main(convert_argv(source, out)) == 3
    manifest = whole_dataset(download(gcs_emulator, out, tmp_path / "after"))
    last = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"][-1]
    assert ", only after the run committed: " in last and f"{out} holds its new dataset, whole" in last, last
    assert sorted(gcs_emulator.list_uris(out + "/")) == sorted(f"{out}/{name}" for name in referenced(manifest))


def test_on_gcs_sigterm_removes_what_the_run_wrote_and_releases_the_lease(gcs_emulator, gcs_bucket, source):
    out = f"gs://{gcs_bucket}/out"
    done = signalled("--terminate", "pipeline.readback:CountShardRecords.process", 1, convert_argv(source, out))
    assert done.returncode == 143, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"{out} holds no dataset" in errors[0], done.stderr[-3000:]
    assert gcs_emulator.list_uris(out + "/") == [], "no shard, staging object or lease is left"
    assert main(convert_argv(source, out)) == 0  # at once: the lease was released


def download(emulator, prefix: str, local: pathlib.Path) -> pathlib.Path:
    download_tree(emulator, prefix, local)
    return local
