"""The runner a job gets (pipeline.runners): local runs get the lean BundleBasedDirectRunner, or
the parallel FnApiRunner when --direct_num_workers asks for several workers, with a warning when the
input will not fit in memory; other runners pass through. On every runner, the experiment that
starts Beam 2.77's racy timed flush thread (data_buffer_time_limit_ms above 0) is refused."""

import functools
import logging
import os
import platform
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import DebugOptions, DirectOptions, StandardOptions, TypeOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from pipeline.runners import (
    COMPRESSING_SHARD_BYTES,
    HELD_ROW_BYTES_PER_INPUT_BYTE,
    LEAN,
    MAX_OPEN_SHARDS,
    OPEN_SHARD_BYTES,
    PARALLEL,
    UnsafeOptionError,
    available_memory,
    check_experiments,
    estimated_peak,
    image_processes,
    lean_held_bytes,
    make_pipeline,
    parallel_held_bytes,
    pipeline_options,
    refuse_unsafe_options,
    runner_api_round_trip,
    runner_of,
    runs_here,
    shard_check_processes,
    spreads_work,
    writes_while_reading,
)
from tests.subprocess_limits import run_pipeline
from transforms.tabular_spill import bucket_memory


def options_runner(beam_args, held_bytes=0):
    """The runner pipeline_options gives these flags, which runner_of (asked before planning, where
    the converting processes are started) must give too."""
    runner = pipeline_options(beam_args, held_bytes).view_as(StandardOptions).runner
    assert runner_of(beam_args) == runner
    return runner


def test_a_local_run_gets_the_lean_runner_whatever_the_cores():
    options = pipeline_options([], held_bytes=200_000_000)
    assert options.view_as(StandardOptions).runner == LEAN


@pytest.mark.parametrize("flags", [[], ["--direct_num_workers", "2"]])
def test_an_input_too_big_for_memory_warns_and_points_to_dataflow(flags, caplog):
    available = available_memory()
    runner = LEAN if not flags else PARALLEL
    base, per_byte = estimated_peak(runner, 0), estimated_peak(runner, 1) - estimated_peak(runner, 0)
    fits = int((available - base) / per_byte * 0.9)
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        assert options_runner(flags, fits) == runner
        assert "run it on Dataflow" not in caplog.text
        assert options_runner(flags, available) == runner
    assert "run it on Dataflow" in caplog.text


def test_a_lean_run_that_writes_while_reading_is_sized_by_its_open_shards(caplog):
    shards = {"train": 400, "validation": 100}
    local = lean_held_bytes("images", shards, True, "/data/out", 10**15)
    remote = lean_held_bytes("images", shards, True, "gs://bucket/out", 10**15)
    assert local == 0 and remote == 500 * OPEN_SHARD_BYTES["gs"], "local parts get each record whole"
    tabular = lean_held_bytes("csv", shards, True, "/data/out", 10**15)
    assert tabular == lean_held_bytes("csv", shards, True, "/data/out", 10**9) < 10**9, "rows wait on disk"
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        options = pipeline_options([], held_bytes=10**15, lean_held_bytes=local)
    assert options.view_as(StandardOptions).runner == LEAN
    assert "run it on Dataflow" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        pipeline_options([], held_bytes=0, lean_held_bytes=available_memory())
    assert "run it on Dataflow" in caplog.text, "open shards that do not fit warn too"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        pipeline_options(["--direct_num_workers", "2"], held_bytes=10**15, lean_held_bytes=local)
    assert "run it on Dataflow" in caplog.text, "the parallel runner holds the records whatever the setting"


def test_a_lean_tabular_run_holds_a_bucket_of_rows_and_a_stream_per_shard_or_every_row():
    shards = {"train": 3, "validation": 1}
    small, large = (lean_held_bytes("csv", shards, True, "/data/out", size) for size in (10**6, 10**12))
    assert small < large == bucket_memory(10**12) + 4 * COMPRESSING_SHARD_BYTES, "up to a bucket of the spill"
    assert lean_held_bytes("csv", shards, False, "/data/out", 10**12) == large, "whatever the image setting"
    too_many = {"train": MAX_OPEN_SHARDS + 1}
    assert lean_held_bytes("csv", too_many, True, "/data/out", 10**9) >= 6 * 10**9, "past them, every row is held"


@pytest.mark.parametrize("flag", [["--direct_num_workers", "1"], ["--direct_num_workers=1"]])
def test_one_worker_asked_for_gets_the_lean_runner(flag):
    assert options_runner(flag) == LEAN


@pytest.mark.parametrize("workers", ["2", "0"])
def test_parallel_workers_asked_for_get_the_parallel_runner_whatever_the_input(workers):
    options = pipeline_options(["--direct_num_workers", workers], held_bytes=10**15)
    assert options.view_as(StandardOptions).runner == PARALLEL
    assert options.view_as(DirectOptions).direct_num_workers == int(workers)
    assert options.view_as(DirectOptions).direct_running_mode == "in_memory"


@pytest.mark.parametrize(
    "flags, round_trip",
    [
        ([], False),  # the lean runner runs the graph as built
        (["--direct_num_workers", "0"], "AUTO"),
        (["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"], "AUTO"),
    ],
)
def test_only_the_lean_runner_skips_beams_runner_api_round_trip(flags, round_trip):
    assert runner_api_round_trip(pipeline_options(flags)) == round_trip


@pytest.mark.parametrize(
    "flags, spreads",
    [
        ([], False),  # the lean runner: one bundle at a time, a Reshuffle only adds steps
        (["--direct_num_workers", "0"], True),
        (["--runner", "DirectRunner"], True),
        (["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"], True),
    ],
)
def test_only_the_lean_runner_skips_the_reshuffles(flags, spreads):
    assert spreads_work(pipeline_options(flags)) is spreads


@pytest.mark.parametrize(
    "flags, checked",
    [
        ([], False),
        (["--direct_num_workers", "0"], True),
        (["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"], True),
    ],
)
def test_only_the_lean_runner_skips_beams_type_checks_while_building(flags, checked):
    assert pipeline_options(flags).view_as(TypeOptions).pipeline_type_check is checked


def test_explicit_runners_pass_through():
    explicit = pipeline_options(["--runner", "DirectRunner"])
    assert explicit.view_as(DirectOptions).direct_running_mode == "in_memory"  # never the lossy multi_threading
    assert explicit.view_as(StandardOptions).runner == "FnApiRunner"  # what Beam's falls back to offline, never Prism
    chosen = pipeline_options(["--runner", "FnApiRunner", "--direct_running_mode", "multi_processing"])
    assert chosen.view_as(DirectOptions).direct_running_mode == "multi_processing"
    assert options_runner(["--runner", "DataflowRunner"], 10**15) == "DataflowRunner"


RUNNERS = {
    "default": [],
    "parallel": ["--direct_num_workers", "2"],
    "DirectRunner": ["--runner", "DirectRunner"],
    "multi_processing": ["--runner", "FnApiRunner", "--direct_running_mode", "multi_processing"],
    "Dataflow": ["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"],
}
TIMED_FLUSH = {
    "space": ["--experiments", "data_buffer_time_limit_ms=1000"],
    "equals": ["--experiments=data_buffer_time_limit_ms=1"],
    "singular flag": ["--experiment=data_buffer_time_limit_ms=50"],
    "in a comma list": ["--experiments=use_runner_v2,data_buffer_time_limit_ms=5"],
    # One item to Beam's parser, but gcloud splits on every comma: refused all the same.
    "after a key=k=v": ["--experiments=master_key=k1=v1,data_buffer_time_limit_ms=5"],
    "repeated flags": ["--experiments=use_runner_v2", "--experiments", "data_buffer_time_limit_ms=5"],
    "a later 0 does not undo it": [
        "--experiments=data_buffer_time_limit_ms=5",
        "--experiments=data_buffer_time_limit_ms=0",
    ],
    "not an integer": ["--experiments=data_buffer_time_limit_ms=1s"],
}


@pytest.mark.parametrize("runner", RUNNERS.values(), ids=RUNNERS.keys())
@pytest.mark.parametrize("experiments", TIMED_FLUSH.values(), ids=TIMED_FLUSH.keys())
def test_a_timed_flush_is_refused_on_every_runner_before_anything_else(runner, experiments, caplog):
    with caplog.at_level(logging.DEBUG, logger="pipeline"):
        with pytest.raises(UnsafeOptionError, match="dropped silently; drop the experiment"):
            pipeline_options([*runner, *experiments], held_bytes=10**15)
    assert not caplog.records  # refused before the runner is chosen or memory estimated
    with pytest.raises(
        UnsafeOptionError, match=r"data_buffer_time_limit_ms=.*\(TimeBasedBufferingClosableOutputStream"
    ):
        refuse_unsafe_options([*runner, *experiments])
    assert issubclass(UnsafeOptionError, ValueError)


@pytest.mark.parametrize(
    "flags, experiments",
    [
        (["--experiments=data_buffer_time_limit_ms=0"], ["data_buffer_time_limit_ms=0"]),
        (
            ["--experiments", "use_runner_v2,data_buffer_time_limit_ms=-1"],
            ["use_runner_v2", "data_buffer_time_limit_ms=-1"],
        ),
        (["--experiments=data_buffer_time_limit_ms"], ["data_buffer_time_limit_ms"]),  # no value, so no limit
        (
            ["--experiments=use_runner_v2", "--experiments=max_data_buffer_time_limit_ms=5,data_buffer_time_limit=5"],
            ["use_runner_v2", "max_data_buffer_time_limit_ms=5", "data_buffer_time_limit=5"],
        ),
        ([], None),
    ],
)
def test_no_timed_flush_and_other_experiments_pass_through_untouched(flags, experiments):
    for runner in RUNNERS.values():
        refuse_unsafe_options([*runner, *flags])
        assert pipeline_options([*runner, *flags]).view_as(DebugOptions).experiments == experiments


@pytest.mark.parametrize(
    "experiments, refused",
    [
        (["data_buffer_time_limit_ms=1000"], True),
        (["a,data_buffer_time_limit_ms=7"], True),  # one settings item, split as gcloud splits it
        ([" data_buffer_time_limit_ms = 7"], True),
        (["a", "data_buffer_time_limit_ms=0"], False),
        (["use_runner_v2", "enable_prime"], False),
    ],
)
def test_experiment_lists_are_checked_item_by_item(experiments, refused):
    if refused:
        with pytest.raises(UnsafeOptionError, match="only data_buffer_time_limit_ms=0 is allowed"):
            check_experiments(experiments)
    else:
        check_experiments(experiments)


def test_the_parallel_runner_pages_grouped_values_through_state():
    runner = make_pipeline(pipeline_options(["--direct_num_workers", "2"])).runner
    assert isinstance(runner, FnApiRunner)
    assert runner._use_state_iterables  # what keeps its peak RSS down
    assert not isinstance(make_pipeline(pipeline_options(["--direct_num_workers", "1"])).runner, FnApiRunner)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_malloc_arenas_are_capped_unless_the_user_chose():
    code = "from pipeline.runners import limit_malloc_arenas; print(limit_malloc_arenas())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    run = functools.partial(subprocess.run, [sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run(env=env).stdout.strip() == "True"
    assert run(env={**env, "MALLOC_ARENA_MAX": "8"}).stdout.strip() == "False"


def test_multi_threading_is_warned_about(caplog):
    pipeline_options(["--direct_num_workers", "2", "--direct_running_mode", "multi_threading"])
    assert "drops records in this mode" in caplog.text
    caplog.clear()
    pipeline_options(["--direct_num_workers", "2"])
    assert "drops records" not in caplog.text


def test_an_explicit_direct_runner_runs_the_job_without_trying_prism(tmp_path):
    """Beam 2.77's DirectRunner would start a Prism job server first (a /tmp/beam-temp* folder,
    then a download from GitHub where there is internet): the job runs on the FnApiRunner."""
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    argv = ["--output", str(tmp_path / "ds"), "--runner", "DirectRunner", "--num_shards", "1"]
    result = run_pipeline(argv, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "validation" in result.stdout and (tmp_path / "ds" / "manifest.json").exists()
    assert not [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("beam-temp")]


def _options(*flags):
    return pipeline_options(list(flags))


@pytest.mark.parametrize("setting", ["auto", 0, 4])
def test_images_are_converted_in_process_on_every_runner_but_the_lean_one(setting):
    for flags in (
        ["--direct_num_workers", "2"],
        ["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"],
        ["--runner", "DirectRunner"],
    ):
        assert image_processes(runner_of(list(flags)), setting) == 0, flags


def test_the_lean_runner_converts_in_as_many_processes_as_set():
    assert image_processes(runner_of([]), 3) == 3
    assert image_processes(runner_of([]), 0) == 0


def on_cores(cores: int, expression: str) -> list[str]:
    """What `expression` (of pipeline.runners' names) prints in a fresh process allowed `cores`
    cores, as taskset or a CI container's cpuset allows them; skips when this machine has fewer."""
    available = len(os.sched_getaffinity(0))
    if cores > available:
        pytest.skip(f"this machine lets the tests use {available} cores")
    script = (
        "import os, sys; os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:int(sys.argv[1])]));"
        f"from pipeline.runners import *; print({expression})"
    )
    out = subprocess.run([sys.executable, "-c", script, str(cores)], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("cores", [1, 2, 3, 4])
def test_auto_is_one_converting_process_per_usable_core_from_three_cores(cores):
    printed = on_cores(cores, "image_processes(runner_of([]), 'auto')")
    assert int(printed[-1]) == (cores if cores >= 3 else 0)


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_the_lean_runner_reads_local_shards_back_in_a_process_per_usable_core(cores):
    local, remote = (
        "shard_check_processes(pipeline_options([]), '/data/out')",
        "shard_check_processes(pipeline_options([]), 'gs://b/out')",
    )
    assert on_cores(cores, f"{local}, {remote}")[-2:] == [str(cores if cores >= 2 else 0), "0"]


def test_other_runners_read_shards_back_on_their_workers():
    for flags in (
        ["--direct_num_workers", "2"],
        ["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"],
    ):
        assert shard_check_processes(_options(*flags), "/data/out") == 0, flags


def test_only_the_lean_runner_writes_records_while_reading():
    shards = {"train": 10, "validation": 2}
    assert writes_while_reading(_options(), "images", shards, True)
    assert writes_while_reading(_options(), "image_csv", shards, True)
    assert not writes_while_reading(_options(), "images", shards, False)
    assert writes_while_reading(_options(), "csv", shards, True)
    assert writes_while_reading(_options(), "csv", shards, False), "the setting is the image kinds'"
    for kind in ("images", "csv"):
        assert not writes_while_reading(_options(), kind, {"train": MAX_OPEN_SHARDS, "validation": 1}, True)
    for flags in (
        ["--direct_num_workers", "2"],
        ["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/t"],
        ["--runner", "DirectRunner"],
    ):
        for kind in ("images", "csv"):
            assert not writes_while_reading(_options(*flags), kind, shards, True), flags


@pytest.mark.parametrize(
    "beam_args, here",
    [
        ([], True),
        (["--direct_num_workers", "2"], True),
        (["--runner", "DataflowRunner", "--project", "p"], False),
        (["--runner=DirectRunner"], False),
    ],
)
def test_a_job_runs_here_without_a_runner_named(beam_args, here):
    assert runs_here(beam_args) is here


def test_the_parallel_runner_is_sized_by_the_rows_it_holds():
    """Tabular rows held as Python objects cost more than their text (scripts/bench_tabular_memory.py
    --runners parallel measures it); image records cost about their bytes."""
    assert parallel_held_bytes("images", 10**9) == 10**9
    assert parallel_held_bytes("csv", 10**9) == HELD_ROW_BYTES_PER_INPUT_BYTE[PARALLEL] * 10**9 > 10**9
