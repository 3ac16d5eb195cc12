"""scripts/bench_docs.py: a benchmark writes its table into the one block of the page named for it,
with the command that printed it and the machine it ran on, and refuses a page without that block
rather than writing the table anywhere else."""

import datetime
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.subprocess_limits import SUBPROCESS_TIMEOUT

sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_docs  # noqa: E402  (a script module, found through the line above)

REPO = Path(__file__).resolve().parents[1]
PAGE = """# Performance

Intro.

<!-- table: first -->
old first table
<!-- /table: first -->

Between.

<!-- table: second -->
<!-- /table: second -->

End.
"""
# Text around a block: anything that holds no marker of its own.
SURROUNDING = st.text().filter(lambda text: "<!--" not in text and "-->" not in text)


def test_a_markdown_table_aligns_figures_right_and_escapes_cells():
    table = bench_docs.markdown_table(["kind", "s", "note"], [["a|b", 1.5, "two\nlines"]], "lrl")
    assert table.splitlines() == ["| kind | s | note |", "|---|---:|---|", "| a\\|b | 1.5 | two lines |"]
    assert bench_docs.markdown_table(["kind", "s"], []).splitlines()[1] == "|---|---:|"


def test_a_table_refuses_rows_and_alignments_that_do_not_fit_its_columns():
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        bench_docs.markdown_table(["a", "b", "c"], [[1, 2]])
    with pytest.raises(ValueError, match="one `l` or `r` per column"):
        bench_docs.markdown_table(["a", "b"], [], "lc")


def test_the_machine_line_names_what_decides_the_figures():
    cpuinfo = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)   CPU @ 2.20GHz\nflags\t\t: fpu\n"
    meminfo = "MemTotal:       24731708 kB\nMemFree:         1000 kB\n"
    line = bench_docs.describe_machine(
        bench_docs.cpu_model(cpuinfo),
        2,
        4,
        bench_docs.memory_gb(meminfo),
        "3.11.7",
        {"Apache Beam": "2.77.0", "TensorFlow": "2.21.0"},
        datetime.date(2026, 11, 27),
    )
    assert line == (
        "Intel(R) Xeon(R) CPU @ 2.20GHz, 2 of 4 cores usable, 25.3 GB memory, Python 3.11.7, "
        "Apache Beam 2.77.0, TensorFlow 2.21.0, 2026-11-27"
    )


def test_a_machine_without_a_model_name_or_tensorflow_is_still_described():
    assert bench_docs.cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\n") is None
    assert bench_docs.memory_gb("") is None
    line = bench_docs.describe_machine(None, 8, 8, None, "3.12.1", {}, datetime.date(2026, 1, 2))
    assert line.endswith(", 8 cores, Python 3.12.1, 2026-01-02")


def test_this_machine_is_described_from_its_own_files():
    line = bench_docs.this_machine()
    assert f"Python {sys.version_info.major}.{sys.version_info.minor}" in line
    assert "Apache Beam " in line  # installed with the project
    assert line.endswith(datetime.date.today().isoformat())


def test_the_command_is_as_a_reader_runs_it_from_the_repository_root():
    script = str(REPO / "scripts" / "benchmark.py")
    command = bench_docs.invoked_command(script, ["--corpus", "bench/photos2k", "--pipeline_args=--x 1"])
    assert command == "python scripts/benchmark.py --corpus bench/photos2k '--pipeline_args=--x 1'"


def test_only_the_named_block_changes():
    written = bench_docs.replace_block(PAGE, "first", "new table")
    assert written == PAGE.replace("old first table", "\nnew table\n")
    assert bench_docs.replace_block(written, "first", "new table") == written
    second = bench_docs.replace_block(PAGE, "second", "x")
    assert second == PAGE.replace("<!-- table: second -->\n", "<!-- table: second -->\n\nx\n\n")


@settings(deadline=None)  # a loaded machine must not fail a test of text
@given(before=SURROUNDING, inside=SURROUNDING, after=SURROUNDING, body=SURROUNDING)
def test_whatever_surrounds_a_block_is_kept_as_it_is(before, inside, after, body):
    page = f"{before}<!-- table: t -->{inside}<!-- /table: t -->{after}"
    written = bench_docs.replace_block(page, "t", body)
    assert written == f"{before}<!-- table: t -->\n\n{body}\n\n<!-- /table: t -->{after}"


@pytest.mark.parametrize(
    "page",
    [
        "no markers at all\n",
        "<!-- table: first -->\nnever closed\n",
        "<!-- /table: first -->\nclosed before it opens\n<!-- table: first -->\n",
        "<!-- table: first -->\n<!-- /table: first -->\n<!-- table: first -->\n<!-- /table: first -->\n",
        "<!-- table: firsts -->\n<!-- /table: firsts -->\n",
    ],
    ids=["missing", "unclosed", "reversed", "twice", "another name"],
)
def test_a_page_without_a_single_block_of_that_name_is_refused(page):
    with pytest.raises(bench_docs.MissingBlock, match="<!-- table: first -->"):
        bench_docs.replace_block(page, "first", "table")


def test_writing_fills_every_block_with_its_table_command_and_machine(tmp_path):
    page = tmp_path / "performance.md"
    page.write_text(PAGE)
    bench_docs.write_tables(str(page), {"first": "| a |", "second": "| b |"}, "python scripts/x.py --y", "a machine")
    text = page.read_text()
    assert "Printed by `python scripts/x.py --y`, on a machine:\n\n| a |\n\n<!-- /table: first -->" in text
    assert "Printed by `python scripts/x.py --y`, on a machine:\n\n| b |\n\n<!-- /table: second -->" in text
    assert "old first table" not in text and text.startswith("# Performance\n\nIntro.\n")


def test_a_page_missing_one_block_is_refused_before_anything_is_written(tmp_path):
    page = tmp_path / "performance.md"
    page.write_text(PAGE)
    with pytest.raises(bench_docs.MissingBlock, match=f"{page}: .*<!-- table: third -->"):
        bench_docs.check_blocks(str(page), ["first", "third"])
    with pytest.raises(bench_docs.MissingBlock, match="third"):
        bench_docs.write_tables(str(page), {"first": "| a |", "third": "| c |"}, "python scripts/x.py", "m")
    assert page.read_text() == PAGE
    bench_docs.check_blocks(str(page), ["first", "second"])


def test_a_linked_page_is_written_where_it_lies(tmp_path):
    page, link = tmp_path / "performance.md", tmp_path / "link.md"
    page.write_text(PAGE)
    link.symlink_to(page)
    bench_docs.write_tables(str(link), {"second": "| b |"}, "python scripts/x.py", "m")
    assert link.is_symlink() and "| b |" in page.read_text()


def test_a_table_name_is_a_plain_word():
    with pytest.raises(ValueError, match="letters, digits"):
        bench_docs.replace_block(PAGE, "first -->", "x")


def test_the_planning_benchmark_writes_its_runs_and_its_cost_estimate_into_their_blocks(tmp_path):
    """scripts/bench_planning.py as a reader runs it, on a small bucket."""
    page = tmp_path / "performance.md"
    page.write_text(
        "".join(f"<!-- table: {name} -->\n<!-- /table: {name} -->\n" for name in ("planning", "dataflow-cost"))
    )
    flags = ["--sizes", "2000", "--folders", "10", "--latencies", "0", "--kinds", "images", "--threads", "1"]
    done = subprocess.run(
        [sys.executable, "scripts/bench_planning.py", *flags, "--docs", str(page)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = page.read_text()
    assert written.count(f"Printed by `python scripts/bench_planning.py {' '.join(flags)} --docs {page}`") == 2
    [row] = [line for line in written.splitlines() if line.startswith("| images |")]
    assert row.startswith("| images | 2,000 | 0 | 1 |") and row.endswith("| ok |")
    assert row in done.stdout, "the table printed is the table written"
    assert "| total (workers' disks and start-up not counted) |  | $" in written
