"""scripts/bench_tabular_memory.py: it converts the CSVs it writes, and sets the peak RSS of each run
against the estimate the run logged (pipeline.runners), which it finds in the run's log."""

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_docs  # noqa: E402  (script modules, found through the line above)
import bench_tabular_memory  # noqa: E402


def test_the_csv_is_as_large_as_asked_and_the_same_every_time(tmp_path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    bench_tabular_memory.make_csv(str(first), 2)
    bench_tabular_memory.make_csv(str(second), 2)
    assert first.read_bytes() == second.read_bytes()
    assert 2_000_000 <= first.stat().st_size < 2_500_000
    assert first.read_text().startswith(bench_tabular_memory.HEADER)


def test_a_run_reports_its_rows_peak_and_logged_estimate_and_writes_them_into_the_page(tmp_path, capsys):
    page = tmp_path / "performance.md"
    page.write_text("Before.\n<!-- table: tabular-memory -->\n<!-- /table: tabular-memory -->\nAfter.\n")
    argv = ["--sizes", "1", "--folder", str(tmp_path), "--docs", str(page)]
    assert bench_tabular_memory.main(argv) == 0
    header, row, wrote = capsys.readouterr().out.splitlines()
    assert header.split()[:5] == ["input", "MB", "rows", "checkout", "runner"]
    size, rows, checkout, runner, wall, peak, estimate, ratio = row.split()
    assert (size, checkout, runner) == ("1", "this", "lean")
    assert int(rows) == sum(1 for _ in (tmp_path / "1mb" / "table.csv").open()) - 1
    assert float(wall) > 0 and float(peak) > 50
    assert 0.5 < float(ratio) < 2, "the estimate was found in the log, and is of the right size"
    assert wrote == f"wrote tabular-memory into {page}"
    written = page.read_text()
    assert f"`python scripts/bench_tabular_memory.py {' '.join(argv)}`" in written
    assert f"| {' | '.join(row.split())} |" in written
    assert written.startswith("Before.\n") and written.endswith("<!-- /table: tabular-memory -->\nAfter.\n")


def test_a_page_without_the_block_is_refused_before_any_run(tmp_path):
    page = tmp_path / "performance.md"
    page.write_text("No block.\n")
    with pytest.raises(bench_docs.MissingBlock, match="tabular-memory"):
        bench_tabular_memory.main(["--sizes", "1", "--folder", str(tmp_path / "csv"), "--docs", str(page)])
    assert not (tmp_path / "csv").exists()
