"""scripts/bench_statistics.py: it converts each input with both checkouts, checks every output
(its records, and this checkout's statistics file), and says when the statistics cost more than
their budget."""

import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "scripts"))

import bench_docs  # noqa: E402  (script modules, found through the line above)
import bench_statistics  # noqa: E402
import bench_tabular_memory  # noqa: E402

BLOCK = f"<!-- table: {bench_statistics.DOCS_BLOCK} -->\n<!-- /table: {bench_statistics.DOCS_BLOCK} -->\n"


def test_a_csv_of_given_rows_holds_them_with_its_word_column_and_the_same_every_time(tmp_path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    bench_tabular_memory.make_csv(str(first), rows=12_345, words=True)
    bench_tabular_memory.make_csv(str(second), rows=12_345, words=True)
    assert first.read_bytes() == second.read_bytes()
    header, *rows = first.read_text().splitlines()
    assert header == "id,x1,x2,x3,count,category,flag,word,label" and len(rows) == 12_345
    assert len({row.split(",")[7] for row in rows}) > 100, "text of many distinct values"


def test_one_invocation_converts_each_input_with_both_checkouts_and_writes_the_page(tmp_path, capsys):
    photos = tmp_path / "photos"
    for label in ("circle", "square"):
        shutil.copytree(REPO / "sample" / "images" / label, photos / label)
    page, report = tmp_path / "performance.md", tmp_path / "report.json"
    page.write_text(f"Before.\n{BLOCK}After.\n")
    argv = ["--baseline", str(REPO), "--corpus", str(photos), "--rows", "300,600", "--runs", "1"]
    argv += ["--folder", str(tmp_path / "tables"), "--json", str(report), "--docs", str(page)]
    assert bench_statistics.main(argv) == 0
    out = capsys.readouterr().out
    figures = json.loads(report.read_text())["inputs"]
    photo_count = sum(1 for _ in photos.glob("*/*.*"))
    assert [(row["input"], row["records"]) for row in figures] == [
        (f"{photo_count} photos", photo_count),
        ("300 rows", 300),
        ("600 rows", 600),
    ]
    for row in figures:
        assert row["check"] == "ok" and set(row["runs"]) == {"this", "baseline"}, row
        assert row["cpu_ratio"] == pytest.approx(row["this_cpu_s"] / row["baseline_cpu_s"])
        assert f"| {row['input']} | {row['this_cpu_s']:.1f} | {row['baseline_cpu_s']:.1f} |" in out
    assert "Peak RSS from 300 rows to 600 rows: this " in out
    written = page.read_text()
    assert f"`python scripts/bench_statistics.py {' '.join(argv)}`" in written and "| 600 rows |" in written
    assert written.startswith("Before.\n") and written.endswith(
        f"<!-- /table: {bench_statistics.DOCS_BLOCK} -->\nAfter.\n"
    )


@pytest.mark.parametrize(
    ("run", "checkout", "verdict"),
    [
        ({"records": 10, "statistics_file": "statistics.pb"}, "this", "ok"),
        ({"records": 10, "statistics_file": ""}, "baseline", "ok"),
        ({"records": 10, "statistics_file": ""}, "this", "WRONG: no statistics file"),
        ({"records": 9, "statistics_file": "statistics.pb"}, "this", "WRONG: 9 records for 10"),
        ({"failed": "exit 1: boom"}, "baseline", "FAILED: exit 1: boom"),
    ],
)
def test_each_output_is_checked(run, checkout, verdict):
    assert bench_statistics.check(run, {"records": 10}, checkout) == verdict


def test_a_cost_over_the_budget_is_named():
    row = {"kind": "rows", "records": 5, "this_peak_rss_mb": 120.0, "baseline_peak_rss_mb": 110.0}
    rows = [{**row, "input": "within", "cpu_ratio": 1.09}, {**row, "input": "over", "cpu_ratio": 1.11}]
    assert "Over the 10% CPU budget: over." in bench_statistics.notes(rows, runs=3)
    assert "All within 10% CPU." in bench_statistics.notes(rows[:1], runs=3)


def test_a_page_without_the_block_is_refused_before_any_run(tmp_path):
    page = tmp_path / "performance.md"
    page.write_text("No block.\n")
    argv = ["--baseline", str(REPO), "--folder", str(tmp_path / "tables"), "--docs", str(page)]
    with pytest.raises(bench_docs.MissingBlock, match=bench_statistics.DOCS_BLOCK):
        bench_statistics.main(argv)
    assert not (tmp_path / "tables").exists()
