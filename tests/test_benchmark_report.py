"""The benchmark's report (scripts/bench_report.py) sets each per-image cost against the default
pipeline's CPU time per image: its wall-clock time per image is shared by the threads that run
those costs side by side, so a share of it overstates them."""

import compileall
import importlib.util
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_report  # noqa: E402  (script modules, found through the line above)
import bench_runs  # noqa: E402
import bench_settings  # noqa: E402

CORPUS = {"files": 10_000, "mb": 990.0}
COSTS = {
    "header_only_us": 18.0,
    "check_image_us": 1_050.0,
    "gzip_zlib_us": 1_600.0,
    "gzip_isal_us": 100.0,
    "gzip_stored_us": 40.0,
    "content_digest_us": 63.0,
    "read_back_us": 42.0,
}


def _run(index: int, wall_s: float, cpu_s: float, reads_done_s: float | None = None) -> dict:
    """One successful run of the pipeline as bench_runs records it."""
    measured = {
        "rc": 0,
        "timed_out": False,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "sys_s": 1.0,
        "peak_rss_mb": 1_200.0,
        "peak_processes": 1,
        "rss_samples": 100,
        "result": {"work_s": wall_s - 1.5},
        "first_read_s": 1.5,
        "reads_done_s": reads_done_s,
    }
    return bench_runs.run_record(index, measured, CORPUS)


def test_per_image_costs_are_shares_of_the_pipelines_cpu_time_per_image(capsys):
    # 2 cores: 10 s of wall-clock time but 20-22 s of CPU for 10,000 images.
    runs = {"pipeline": [_run(1, 10.0, 20.0), _run(2, 10.5, 21.0), _run(3, 9.5, 22.0)]}
    results = bench_report.summarize_all(["pipeline"], runs, {}, {"pipeline": []})
    assert results["pipeline"]["median"]["cpu_us_per_image"] == 2_100.0

    bench_report.print_per_image_costs(COSTS, results, runs=3)

    printed = capsys.readouterr().out
    assert "check_image 1050 us (50% of the pipeline's CPU time per image)" in printed
    assert "XXH3-128 of the source (to find copies) 63 us (3% of the pipeline's CPU time per image)" in printed
    assert "read-back before publishing 42 us (2% of the pipeline's CPU time per image)" in printed


def test_per_image_costs_print_without_shares_when_the_pipeline_did_not_run(capsys):
    bench_report.print_per_image_costs(COSTS, {}, runs=3)

    printed = capsys.readouterr().out
    assert "check_image 1050 us;" in printed
    assert "% of the pipeline" not in printed


def test_the_reading_phase_is_set_against_all_of_the_floors_work(capsys):
    """From the pipeline's first image read to its last record made, beside the floor's work:
    what the pipeline does per image once started, without its fixed start-up and end."""
    runs = {
        "pipeline": [_run(1, 10.0, 20.0, reads_done_s=9.5), _run(2, 10.5, 21.0, reads_done_s=10.5)],
        "floor": [_floor_run()],
    }
    results = bench_report.summarize_all(["pipeline", "floor"], runs, {}, {"pipeline": [], "floor": []})

    assert results["pipeline"]["median"]["reading_s"] == 8.5  # (8.0 + 9.0) / 2, after the 1.5 s start-up
    assert results["pipeline"]["ratios"]["vs_floor"]["reading"] == 7.0 / 8.5
    bench_report.print_floor_ratios(results)
    assert "reading 0.82x" in capsys.readouterr().out


def _import_from(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_modules_compiled_at_every_start_are_named(tmp_path, monkeypatch, capsys):
    """A module without cached bytecode (installed with --no-compile, bytecode writes off) is
    compiled by every run; once compiled ahead (compileall), it is not named any more."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    source = tmp_path / "uncached_module.py"
    source.write_text("VALUE = 1\n")
    module = _import_from(source)

    assert bench_report.without_bytecode([module, sys]) == ["uncached_module"]
    bench_report.print_bytecode_note(["uncached_module"])
    said = capsys.readouterr().out
    assert "1 module(s) imported here have no cached bytecode (uncached_module 1)" in said

    assert compileall.compile_file(str(source), quiet=1)
    assert bench_report.without_bytecode([_import_from(source)]) == []
    bench_report.print_bytecode_note([])
    assert capsys.readouterr().out == ""


def test_the_bytecode_note_counts_modules_per_package_most_first(capsys):
    bench_report.print_bytecode_note(["pipeline.cli", "apache_beam", "apache_beam.io"])
    assert "3 module(s) imported here have no cached bytecode (apache_beam 2, pipeline 1)" in capsys.readouterr().out
    many = [f"package{n}.module{m}" for n in range(8) for m in range(n + 1)]
    bench_report.print_bytecode_note(many)
    said = capsys.readouterr().out
    assert "(package7 8, package6 7, package5 6, package4 5, package3 4, package2 3, 2 more packages)" in said


def _floor_run() -> dict:
    measured = {
        "rc": 0,
        "timed_out": False,
        "wall_s": 7.5,
        "cpu_s": 14.0,
        "sys_s": 0.5,
        "peak_rss_mb": 100.0,
        "peak_processes": 3,
        "rss_samples": 100,
        "result": {"work_s": 7.0},
        "first_read_s": None,
    }
    return bench_runs.run_record(1, measured, CORPUS)


def test_the_docs_tables_hold_the_medians_and_the_ratios_whose_baselines_ran():
    """The serial loop did not run and plain Beam failed: no ratio to either is shown, and the
    failure is named; the pipeline is set against the floor it ran beside."""
    failed = {**_run(1, 3.0, 2.0), "rc": 1}
    runs = {
        "pipeline": [_run(1, 10.0, 20.0), _run(2, 10.5, 21.0), _run(3, 9.5, 22.0)],
        "floor": [_floor_run()],
        "plain_beam": [failed],
    }
    results = bench_report.summarize_all(list(runs), runs, {}, {v: [] for v in runs})

    tables = bench_report.docs_tables(results, COSTS, CORPUS["files"])

    assert list(tables) == ["conversion-10000", "conversion-10000-costs"]
    variants = tables["conversion-10000"].splitlines()
    assert variants[:4] == [
        "| variant | img/s (min-max) | CPU s | peak RSS | start-up s | vs floor, wall | vs floor, after start-up |",
        "|---|---:|---:|---:|---:|---:|---:|",
        "| `pipeline`: the CLI as it is | 1000.0 (952-1053) | 21.00 | 1,200 MB | 1.50 | 0.75x | 0.82x |",
        "| `floor`: the necessary work, a process per core, no Beam | 1333.3 (1333-1333) | 14.00 | 100 MB | 0.50 "
        "|  |  |",
    ]
    assert "No successful run: plain_beam." in variants
    assert variants[-1].startswith("Load average after each run: median ")
    costs = tables["conversion-10000-costs"].splitlines()
    assert "| integrity check (`check_image`: header, then a 1/8-scale draft decode of a JPEG) | 1,050 | 50% |" in costs
    assert len(costs) == 2 + len(COSTS)


def test_every_variant_has_a_label_in_the_docs():
    assert set(bench_report.DOCS_LABELS) == set(bench_settings.VARIANTS)
