"""Retried bundles commit exactly. Dataflow runs a bundle again when its worker fails or stops
reporting, after the first attempt may have done its work: written shard parts, even committed the
dataset. The nearest local stand-in is `--direct_runner_bundle_repeat 1`: the FnApiRunner runs each
bundle once more before the run that counts, whose outputs alone go on, while every side effect of
both stays. Each kind of the bundled sample, converted that way on the parallel runner, must commit
the records and manifest a normal run commits, and leave nothing else in DEST. The lean runner
never repeats a bundle, so it refuses the flag (pipeline.runners.check_bundle_repeat)."""

from __future__ import annotations

import shutil

import pytest

from pipeline.cli import main
from tests import broken_images
from tests.dataset_reader import load_rejected, read_dead_letters
from tests.portable_stack import KINDS, SAMPLE, contents

REPEAT = ["--direct_runner_bundle_repeat", "1"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_bundle_run_twice_commits_what_a_normal_run_does(kind, tmp_path):
    args, key = KINDS[kind]
    normal, repeated = tmp_path / "normal", tmp_path / "repeated"
    assert main([*args, "--output", str(normal)]) == 0
    assert main([*args, "--output", str(repeated), "--direct_num_workers", "2", *REPEAT]) == 0

    assert contents(repeated, key) == contents(normal, key)
    assert sorted(p.name for p in repeated.iterdir()) == sorted(p.name for p in normal.iterdir())


def test_every_bundle_run_twice_replaces_a_dataset_as_a_normal_run_does(tmp_path):
    """Over a committed dataset (--overwrite) the commit has four steps (pipeline.folder_store);
    run again after the last, it changes nothing."""
    args, key = KINDS["csv"]
    normal, repeated = tmp_path / "normal", tmp_path / "repeated"
    assert main([*args, "--output", str(normal), "--overwrite"]) == 0  # nothing to replace: the same options
    assert main([*args, "--output", str(repeated)]) == 0
    assert main([*args, "--output", str(repeated), "--overwrite", "--direct_num_workers", "2", *REPEAT]) == 0

    assert contents(repeated, key) == contents(normal, key)
    assert sorted(p.name for p in repeated.iterdir()) == sorted(p.name for p in normal.iterdir())


def test_every_bundle_run_twice_rejects_a_run_as_a_normal_run_does(tmp_path):
    """A run over its error budget, recorded as rejected by the first attempt, stays rejected."""
    source = tmp_path / "photos"
    for label in ("circle", "square"):
        (source / label).mkdir(parents=True)
        shutil.copy(SAMPLE / "images" / label / "0001.jpg", source / label / "0001.jpg")
    (source / "circle" / "truncated.jpg").write_bytes(broken_images.truncated_jpeg())
    normal, repeated = tmp_path / "normal", tmp_path / "repeated"
    assert main(["--input", str(source), "--output", str(normal)]) == 1
    assert main(["--input", str(source), "--output", str(repeated), "--direct_num_workers", "2", *REPEAT]) == 1

    reasons = [reason.replace(str(repeated), str(normal)) for reason in load_rejected(repeated).rejected]
    assert reasons == list(load_rejected(normal).rejected)
    assert read_dead_letters(repeated) == read_dead_letters(normal)
    assert sorted(p.name for p in repeated.iterdir()) == sorted(p.name for p in normal.iterdir())


@pytest.mark.parametrize("runner", [[], ["--direct_num_workers", "1"], ["--runner", "BundleBasedDirectRunner"]])
def test_the_lean_runner_refuses_to_pretend_it_repeats_bundles(runner, tmp_path, caplog):
    out = tmp_path / "out"
    assert main([*KINDS["images"][0], "--output", str(out), *runner, *REPEAT]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "runs every bundle once" in line and "--direct_num_workers 2" in line
    assert not out.exists()


def test_a_refresh_with_every_bundle_run_twice_publishes_what_a_normal_refresh_does(tmp_path):
    """A refresh writes into its own version folder and then moves LATEST: run again, its publish
    step writes the same files and points LATEST at the same version."""
    args, key = KINDS["images"]
    normal, repeated = tmp_path / "normal", tmp_path / "repeated"
    assert main(["refresh", *args, "--output", str(normal)]) == 0
    assert main(["refresh", *args, "--output", str(repeated), "--direct_num_workers", "2", *REPEAT]) == 0
    [normal_version] = [p for p in normal.iterdir() if p.is_dir() and not p.name.startswith(".")]
    [version] = [p for p in repeated.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert (repeated / "LATEST").read_text().strip() == version.name
    assert contents(version, key) == contents(normal_version, key)
    assert sorted(p.name for p in version.iterdir()) == sorted(p.name for p in normal_version.iterdir())
    assert sorted(p.name for p in repeated.iterdir()) == sorted(["LATEST", version.name])
