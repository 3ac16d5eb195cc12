"""scripts/bench_tabular_memory.py: it converts the CSVs it writes, and sets the peak RSS of each run
against the estimate the run logged (pipeline.runners), which it finds in the run's log."""

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_tabular_memory  # noqa: E402  (a script module, found through the line above)


def test_the_csv_is_as_large_as_asked_and_the_same_every_time(tmp_path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    bench_tabular_memory.make_csv(str(first), 2)
    bench_tabular_memory.make_csv(str(second), 2)
    assert first.read_bytes() == second.read_bytes()
    assert 2_000_000 <= first.stat().st_size < 2_500_000
    assert first.read_text().startswith(bench_tabular_memory.HEADER)


def test_a_run_reports_its_rows_peak_and_logged_estimate(tmp_path, capsys):
    assert bench_tabular_memory.main(["--sizes", "1", "--folder", str(tmp_path)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["input", "MB", "rows"]
    size, rows, checkout, wall, peak, estimate, ratio = row.split()
    assert (size, checkout) == ("1", "this")
    assert int(rows) == sum(1 for _ in (tmp_path / "1mb" / "table.csv").open()) - 1
    assert float(wall) > 0 and float(peak) > 50
    assert 0.5 < float(ratio) < 2, "the estimate was found in the log, and is of the right size"
