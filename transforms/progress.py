"""Progress a person can read: each phase of a run (listing, converting, writing, reading back) as
what is done of its total, percent, rate and time left.

A Phase is made where the job is built (the launcher) and travels, pickled, with the steps that
count into it (`Phase.add`). How it shows depends on where it counts:

* In the launcher's process (the local runners run the job there, a portable runner's LOOPBACK
  workers too) every step and thread counting a phase counts into one tracker, so its numbers are
  the job's. On a terminal (the command logs through a ConsoleHandler whose stream is a TTY) a
  tqdm bar is redrawn in place, and log records are written above the bars instead of through
  them; otherwise (a log file, a pipe) a log line every LINE_SECONDS, such as
  `converting: 2,417 of 10,000 sources (24%), 239/s, about 32 s left`, and one when it ends.
* In any other process (a Dataflow or portable SDK worker, the parallel runner's
  multi_processing workers) the process sees only its share of the job: a line every
  LINE_SECONDS names the worker and counts what it did there, with no total, percent or time
  left (the job's total would make a worker's share look stalled; the runner's own console shows
  the job's progress), as in `converting on worker HOST, process 12: 2,417 sources so far, 239/s`.

A phase ends when its count reaches its total, when `finish` says so, or, in the launcher's
process, when the next phase starts counting: each phase of the job waits for the whole of the one
before (a GroupByKey or a side input lies between them), so one that has not reached its total by
then (a count that was unknown, or a listing that changed since it was planned) is over too.

A phase counts when work is done, never on a timer: a step that waits on one slow file shows
nothing new until that file is done.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

_LOG = logging.getLogger(__name__)

# Seconds between two log lines of a phase that is not drawn as a bar (tests lower it).
LINE_SECONDS = float(os.environ.get("TFRECORD_PROGRESS_SECONDS", "30"))
BAR_SECONDS = 0.2  # a bar is redrawn at most this often
BYTES = "bytes"  # the unit of a phase counted in bytes (shown in kB, MB, GB)
T = TypeVar("T")


def _here() -> tuple[str, int]:
    return socket.gethostname(), os.getpid()


class Phase:
    """One phase of a run: its `name` ("converting"), the `unit` it counts ("sources", or BYTES)
    and its `total` (None when unknown: then only the count and the rate show). Made in the
    launcher; every copy of it (pickled with a step) counts into the same tracker of the process
    it runs in."""

    def __init__(self, name: str, unit: str, total: int | None = None):
        self.name, self.unit, self.total = name, unit, total
        self._key = uuid.uuid4().hex  # one job's phase, not another's of the same name
        self._origin = _here()
        self._tracker: _Tracker | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_tracker": None}

    def add(self, amount: int = 1) -> None:
        """Counts `amount` more done (the first call starts the phase)."""
        (self._tracker or self._start()).add(amount)

    def set_total(self, total: int) -> None:
        """The total, where only the step that counts learns it (before it counts)."""
        (self._tracker or self._start()).set_total(total)

    def finish(self) -> None:
        """Ends the phase where it stands (its end line says how far it got)."""
        (self._tracker or self._start()).finish()

    def _start(self) -> _Tracker:
        with _STARTING:
            tracker = _TRACKERS.get(self._key)
            if tracker is None:
                in_launcher = self._origin == _here()
                if in_launcher:  # the phases before this one are over (module docstring)
                    for earlier in list(_TRACKERS.values()):
                        if earlier.in_launcher:
                            earlier.finish()
                tracker = _TRACKERS[self._key] = _Tracker(self, in_launcher, _bar_stream() if in_launcher else None)
        self._tracker = tracker
        return tracker


COUNT_EVERY = 256  # items of a fast loop counted at once (counted): a count costs a lock and a clock read


def counted(items: Iterable[T], phase: Phase) -> Iterator[T]:
    """`items`, each counted into `phase` once the loop over them has taken the next one (in
    COUNT_EVERY at a time, and the rest at the end)."""
    uncounted = 0
    for item in items:
        yield item
        uncounted += 1
        if uncounted == COUNT_EVERY:
            phase.add(uncounted)
            uncounted = 0
    if uncounted:
        phase.add(uncounted)


_TRACKERS: dict[str, _Tracker] = {}  # this process's, by phase; an ended one stays (it ignores counts)
_STARTING = threading.Lock()


class _Bar(tqdm):
    monitor_interval = 0  # no monitor thread: the tracker redraws as it counts


class _Tracker:
    """A phase as counted in this process: a bar on `stream` (a terminal), else log lines (logged
    once its lock is let go: a log handler may close bars, which takes it)."""

    def __init__(self, phase: Phase, in_launcher: bool, stream):
        self.name, self.unit = phase.name, phase.unit
        self.total = phase.total if in_launcher else None
        self.in_launcher = in_launcher
        self.done, self.open = 0, True
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._bar = None
        if stream is not None:
            in_bytes, columns = self.unit == BYTES, _columns(stream)
            self._bar = _Bar(
                total=self.total,
                desc=self.name,
                unit="B" if in_bytes else f" {self.unit}",
                unit_scale=in_bytes,
                unit_divisor=1000,
                file=stream,
                leave=True,
                dynamic_ncols=columns > 0,
                ncols=None if columns else DEFAULT_SIZE[0],
                nrows=None if columns else DEFAULT_SIZE[1],
                mininterval=BAR_SECONDS,
            )
        self._next = self._started + (BAR_SECONDS if self._bar is not None else LINE_SECONDS)

    def add(self, amount: int) -> None:
        with self._lock:
            if not self.open:  # ended: a count past its total, or after the next phase began
                return
            self.done += amount
            if self.total is not None and self.done >= self.total:
                line = self._end(finished=True)
            else:
                now = time.monotonic()
                if now < self._next:
                    return
                line = self._show(now)
        if line:
            _LOG.info("%s", line)

    def set_total(self, total: int) -> None:
        if not self.in_launcher:
            return
        with self._lock:
            self.total = total
            if self._bar is not None:
                self._bar.total = total
                self._bar.refresh()

    def finish(self) -> None:
        """Ends the phase where it stands, with its end line (or its bar as it stands)."""
        with self._lock:
            line = self._end(finished=True) if self.open else None
        if line:
            _LOG.info("%s", line)

    def close(self) -> None:
        """Ends the phase without an end line (the run failed): a bar is left as it stands."""
        with self._lock:
            if self.open:
                self._end(finished=False)

    def _show(self, now: float) -> str | None:
        """Redraws the bar, or returns the line to log."""
        if self._bar is not None:
            self._bar.update(self.done - self._bar.n)
            self._next = now + BAR_SECONDS
            return None
        self._next = now + LINE_SECONDS
        return self.line(now)

    def _end(self, finished: bool) -> str | None:
        """Closes the bar (left as it stands), or returns the end line to log."""
        self.open = False
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.update(self.done - bar.n)
            bar.close()
            return None
        return self.end_line(time.monotonic()) if finished and self.in_launcher else None

    def line(self, now: float) -> str:
        elapsed = now - self._started
        rate = _rate(self.done, elapsed, self.unit)
        if not self.in_launcher:
            host, pid = _here()
            return f"{self.name} on worker {host}, process {pid}: {_amount(self.done, None, self.unit)} so far, {rate}"
        if self.total is None:
            return f"{self.name}: {_amount(self.done, None, self.unit)}, {rate}"
        percent = 100 * self.done // self.total if self.total else 100
        left = (self.total - self.done) * elapsed / self.done if self.done else None
        eta = "" if left is None else f", about {duration(left) if left >= 10 else f'{max(1, round(left))} s'} left"
        return f"{self.name}: {_amount(self.done, self.total, self.unit)} ({percent}%), {rate}{eta}"

    def end_line(self, now: float) -> str:
        elapsed = now - self._started
        total = self.total if self.total is not None and self.total != self.done else None
        planned = " planned" if total is not None and self.unit != BYTES else ""
        rate = f", {_rate(self.done, elapsed, self.unit)}" if elapsed >= 1 else ""  # not of a moment's work
        return f"{self.name} done: {_amount(self.done, total, self.unit)}{planned} in {duration(elapsed)}{rate}"


def _amount(done: int, total: int | None, unit: str) -> str:
    """'2,417 of 10,000 sources', '2,417 sources', '120.4 MB of 1.2 GB'."""
    if unit == BYTES:
        return _size(done) + (f" of {_size(total)}" if total is not None else "")
    return f"{done:,}" + (f" of {total:,}" if total is not None else "") + f" {unit}"


def _size(size: float) -> str:
    """'512 bytes', '41.2 kB', '120.4 MB', '1.2 GB'."""
    if size < 1e3:
        return f"{size:.0f} bytes"
    for scale, name in ((1e3, "kB"), (1e6, "MB")):
        if size < 1e3 * scale:
            return f"{size / scale:.1f} {name}"
    return f"{size / 1e9:,.1f} GB"


def _rate(done: int, seconds: float, unit: str) -> str:
    per_second = done / seconds if seconds > 0 else 0.0
    if unit == BYTES:
        return f"{_size(per_second)}/s"
    return f"{per_second:,.0f}/s" if per_second >= 10 else f"{per_second:.1f}/s"


def duration(seconds: float) -> str:
    """'4.2 s', '32 s', '4 min 10 s', '2 h 5 min'."""
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


class ConsoleHandler(logging.StreamHandler):
    """A command's log handler: each record is written above the progress bars, which are cleared
    and drawn again below it (tqdm.external_write_mode), so neither tears the other. A record of
    an error first leaves the bars as they stand: the run is failing, and what it had done stays
    above the error."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            _close_bars()
        with tqdm.external_write_mode(file=self.stream):
            super().emit(record)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # not a file, or closed
        return False


DEFAULT_SIZE = (100, 24)  # columns, rows of a terminal that does not say its size (a pseudo-terminal of 0 x 0)


def _columns(stream) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def _bar_stream():
    """The terminal bars are drawn on: the stream of the root logger's ConsoleHandler, when that
    is a terminal; else None (phases log lines)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, ConsoleHandler) and _is_terminal(handler.stream):
            return handler.stream
    return None


def _close_bars() -> None:
    for tracker in list(_TRACKERS.values()):  # no lock: a handler may call it while a phase starts
        if tracker._bar is not None:  # one drawing lines is left alone (and its lock untaken)
            tracker.close()


def close_all() -> None:
    """Ends every phase of this process without an end line: a command is over, and a phase it
    left open (its run failed, or a count never reached its total) must not end inside the next
    command's output."""
    for tracker in list(_TRACKERS.values()):
        tracker.close()


atexit.register(_close_bars)  # a failed or interrupted run: its bars end where they stood
