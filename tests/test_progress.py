"""Progress a person can read (transforms.progress): each phase of a run as done of total, percent,
rate and time left; bars redrawn in place on a terminal, with log records written whole above
them; plain lines in a log; a worker's own count, without the job's total, in another process.
The runs are real: the CLI on the bundled sample, as a subprocess whose stderr is a file or a
pseudo-terminal."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import pathlib
import pickle
import pty
import re
import struct
import subprocess
import sys
import termios
import threading

import pytest

from pipeline import shard_check
from pipeline.cli import main
from transforms import progress

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample"
TIMEOUT = 900  # a hang, not a slow machine
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
SEGMENT = re.compile(r"[\r\n]+")  # a terminal's lines, and what a bar redraws in place

sys.path.append(str(REPO / "scripts"))
import bench_measure  # noqa: E402  (a script module, found through the line above)


@pytest.fixture(autouse=True)
def no_phase_left_open():
    """Each test's phases are its own: one left open would end when the next test's starts."""
    yield
    for tracker in list(progress._TRACKERS.values()):
        tracker.close()


@pytest.fixture()
def every_count_logs(monkeypatch):
    """Every count logs a line, in a process where no earlier test left a phase open."""
    progress.close_all()
    monkeypatch.setattr(progress, "LINE_SECONDS", 0.0)


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == progress.__name__]


# --- the lines, in this process (the launcher's)


def test_a_phase_with_a_total_says_how_far_how_fast_and_how_long(every_count_logs, caplog):
    caplog.set_level(logging.INFO, progress.__name__)
    converting = progress.Phase("converting", "sources", 10_000)
    converting.add(2_417)
    converting.add(7_583)
    converting.add(5)  # past its end: ignored
    first, end = _messages(caplog)
    assert re.fullmatch(r"converting: 2,417 of 10,000 sources \(24%\), [\d,.]+/s, about [\w ]+ left", first), first
    assert re.fullmatch(r"converting done: 10,000 sources in [\d.]+ s(, [\d,]+/s)?", end), end


def test_a_command_ends_the_phases_it_left_open(every_count_logs, tmp_path, caplog):
    """A run that stops before its phases end leaves none open to end inside the next command's output."""
    caplog.set_level(logging.INFO, progress.__name__)
    progress.Phase("listing", "files", 10).add(3)
    assert main(["--input", str(tmp_path / "missing"), "--output", str(tmp_path / "out")]) == 2
    progress.Phase("converting", "sources", 2).add(2)
    assert _messages(caplog)[1:] == ["converting done: 2 sources in 0.0 s"]


def test_without_a_total_the_count_and_the_rate(every_count_logs, caplog):
    caplog.set_level(logging.INFO, progress.__name__)
    listing = progress.Phase("listing", "files")
    for _ in progress.counted(range(1000), listing):
        pass
    listing.finish()
    *counts, end = _messages(caplog)
    assert counts and all(re.fullmatch(r"listing: [\d,]+ files, [\d,.]+/s", line) for line in counts), counts
    assert counts[-1].startswith("listing: 1,000 files, ")  # counted in batches, the rest at the end
    assert re.fullmatch(r"listing done: 1,000 files in [\d.]+ s(, [\d,]+/s)?", end), end


def test_bytes_show_in_their_scale(every_count_logs, caplog):
    caplog.set_level(logging.INFO, progress.__name__)
    reading = progress.Phase("reading CSV", progress.BYTES, 1_234_000_000)
    reading.add(120_400_000)
    line = _messages(caplog)[0]
    assert re.fullmatch(r"reading CSV: 120.4 MB of 1.2 GB \(9%\), [\d,.]+ [kMG]?B/s, about .+ left", line), line


def test_the_next_phase_ends_the_ones_before_it(caplog):
    """The job's phases follow one another: one short of its total (the input changed since it
    was planned) is over once the next starts, and its end line says how far it got."""
    caplog.set_level(logging.INFO, progress.__name__)
    converting, writing = progress.Phase("converting", "sources", 10), progress.Phase("writing", "shards", 2)
    converting.add(9)
    writing.add()
    converting.add()  # late: its phase is over
    [end] = _messages(caplog)
    assert end.startswith("converting done: 9 of 10 sources planned in "), end


def test_every_copy_of_a_phase_counts_into_one_tracker_here(caplog):
    """The steps of one phase, each with a pickled copy (as Beam ships them), count together."""
    caplog.set_level(logging.INFO, progress.__name__)
    phase = progress.Phase("listing in the job", "files", 4)
    copies = [pickle.loads(pickle.dumps(phase)) for _ in range(2)]
    for copy in copies:
        copy.add(2)
    [end] = _messages(caplog)
    assert end.startswith("listing in the job done: 4 files in "), end


def test_a_worker_elsewhere_counts_its_own_share_without_the_jobs_total():
    """In another process (a Dataflow or portable worker) the job's total is not the worker's: its
    line names the worker and what it did there, and it has no end line."""
    phase = progress.Phase("converting", "sources", 10_000)
    code = (
        "import logging, pickle, sys\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s', stream=sys.stdout)\n"
        "from transforms import progress\n"
        "progress.LINE_SECONDS = 0\n"
        "phase = pickle.load(sys.stdin.buffer)\n"
        "phase.add(2417)\n"
        "phase.finish()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(phase), capture_output=True, cwd=REPO, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert re.fullmatch(
        r"converting on worker \S+, process \d+: 2,417 sources so far, [\d,.]+/s\n", done.stdout.decode()
    ), done.stdout


def test_the_shard_check_counts_each_shard_as_it_is_read(tmp_path, monkeypatch):
    """Here and in processes of their own (where the answers come as each process gives them)."""
    shards = []
    for i in range(5):
        path = tmp_path / f"train-{i:05d}-of-00005.tfrecord"
        path.write_bytes(b"")
        shards.append(str(path))
    for in_processes_from in (shard_check.IN_PROCESSES_FROM_BYTES, 0):
        monkeypatch.setattr(shard_check, "IN_PROCESSES_FROM_BYTES", in_processes_from)
        counted = []
        found = shard_check.count_shards(shards, "NONE", False, 2, functools.partial(counted.append, 1))
        assert len(counted) == len(found) == 5


def test_log_records_are_written_whole_above_a_bar(monkeypatch):
    """On a terminal, the bar is cleared for a record and drawn again below it."""
    master, slave = _terminal(24, 100)
    stream = open(slave, "w", buffering=1, closefd=True)  # noqa: SIM115  (closed below)
    handler = progress.ConsoleHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [handler])
    monkeypatch.setattr(progress, "BAR_SECONDS", 0.0)
    shown = _Drained(master)
    try:
        phase = progress.Phase("converting", "sources", 4)
        phase.add()
        logging.getLogger("pipeline").warning("cannot list a/b: a dangling link")
        phase.add(3)
    finally:
        stream.close()
    text = shown.result()
    segments = SEGMENT.split(text)
    assert "WARNING pipeline: cannot list a/b: a dangling link" in segments, segments
    assert any(re.match(r"converting: +25%\|.*\| 1/4 ", s) for s in segments), segments
    assert any(re.match(r"converting: 100%\|.*\| 4/4 ", s) for s in segments), segments
    assert not [m for m in segments if "converting done" in m]  # the bar says it: no end line


# --- real runs of the CLI


def _run(argv: list[str], stderr, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *argv],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        timeout=TIMEOUT,
        check=False,
    )


def test_a_run_logged_to_a_file_has_plain_phase_lines_with_totals(tmp_path):
    log = tmp_path / "stderr.txt"
    with open(log, "wb") as err:
        done = _run(
            ["--input", str(SAMPLE / "images"), "--output", str(tmp_path / "out"), "--num_shards", "2"],
            err,
            {"TFRECORD_PROGRESS_SECONDS": "0"},  # a line at every count: the sample takes a second
        )
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    assert "\r" not in text
    lines = re.findall(rf"^{STAMP} INFO transforms\.progress: (.*)$", text, re.M)
    converting = [line for line in lines if line.startswith("converting: ")]
    assert converting and all(
        re.fullmatch(r"converting: [\d,]+ of 360 sources \(\d+%\), [\d,.]+/s, about [\w ]+ left", line)
        for line in converting
    ), converting[:3]
    ends = [re.sub(r" in [\d.]+ s.*", "", line) for line in lines if " done: " in line]
    assert ends == [
        "listing done: 360 files",
        "converting done: 360 sources",
        "writing done: 4 shards",
        "reading back done: 4 shards",
    ]
    assert "in this worker" not in text and "in this bundle" not in text
    # What the benchmark reads of a run's log: when it read its first image, when it made its last record.
    started = bench_measure.FIRST_READ.search(text).group(1)
    assert bench_measure.READS_DONE.search(text).group(1) >= started


def test_a_tabular_run_reads_its_bytes_and_converts_its_rows(tmp_path):
    log = tmp_path / "stderr.txt"
    with open(log, "wb") as err:
        done = _run(
            ["--kind", "csv", "--input", str(SAMPLE / "tabular" / "*.csv*"), "--output", str(tmp_path / "out")], err
        )
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    ends = [re.sub(r" in [\d.]+ s.*", "", line) for line in re.findall(r"progress: (.* done: .*)$", text, re.M)]
    listed = sum(path.stat().st_size for path in (SAMPLE / "tabular").glob("*.csv*"))
    assert ends == [
        "listing done: 3 files",
        f"reading CSV done: {listed / 1e3:.1f} kB",  # every listed byte, a .gz's as stored
        "converting done: 1,500 rows",
        "writing done: 2 shards",
        "reading back done: 2 shards",
    ]


@pytest.mark.parametrize("size", [(40, 120), (0, 0)], ids=["sized", "unsized"])
def test_a_run_on_a_terminal_redraws_bars_and_keeps_log_lines_whole(tmp_path, size):
    """A pseudo-terminal that does not say its size (CI's, `script` without a terminal) gets
    bars of a default width."""
    master, slave = _terminal(*size)
    shown = _Drained(master)
    try:
        done = _run(["--input", str(SAMPLE / "images"), "--output", str(tmp_path / "out")], slave)
    finally:
        os.close(slave)
    text = shown.result()
    assert done.returncode == 0, text[-3000:]
    segments = SEGMENT.split(text)
    for phase, total in (("converting", "360/360"), ("writing", "2/2"), ("reading back", "2/2")):
        assert any(re.match(rf"{phase}: 100%\|█+\| {total} \[", s) for s in segments), (phase, segments)
    assert any(re.match(r"listing: 360 files \[", s) for s in segments), segments
    assert "\r" in text  # redrawn in place
    assert [s for s in segments if re.fullmatch(rf"{STAMP} INFO pipeline\.planning: planned .*shards .*", s)]
    assert [s for s in segments if re.fullmatch(rf"{STAMP} INFO transforms\.images: reading images on .*", s)]
    assert "transforms.progress" not in text  # bars, not lines


# --- a pseudo-terminal


def _terminal(rows: int, columns: int) -> tuple[int, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    return master, slave


class _Drained:
    """What a terminal shows, read as it comes (a full terminal would stop its writer)."""

    def __init__(self, master: int):
        self._master, self._chunks = master, []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            self._chunks.append(chunk)

    def result(self) -> str:
        self._thread.join(TIMEOUT)
        os.close(self._master)
        return b"".join(self._chunks).decode("utf-8", "replace")
