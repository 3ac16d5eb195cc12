"""Running one measured subprocess: wall-clock and CPU time, and the peak memory of its whole process
tree (Beam's and multiprocessing's workers included), read from /proc while it runs."""

from __future__ import annotations

import datetime
import json
import os
import re
import resource
import signal
import subprocess
import threading
import time

from bench_settings import REPO_ROOT, RESULT_TAG

SAMPLE_INTERVAL_S = 0.05
FULL_SCAN_EVERY = 20  # samples between two scans of all of /proc for re-parented descendants
# The `elapsed N s,` line of the pipeline CLI's summary (pipeline/report.py): its time after imports.
PIPELINE_ELAPSED = re.compile(r"^\s*elapsed ([0-9.]+) s,", re.MULTILINE)
# ReadImages' first log line (transforms/images.py), in the CLI's log format (pipeline/cli.py):
# its timestamp is when the job starts reading images.
FIRST_READ = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO transforms\.images: reading images", re.MULTILINE
)
# The line that ends a run's converting phase (transforms.progress; logged where stderr is not a
# terminal, as here): its timestamp is when its last record was made.
READS_DONE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO transforms\.progress: converting done: ", re.MULTILINE
)


def _children(pid: int) -> list[int]:
    """Direct children of `pid` via /proc/<pid>/task/<tid>/children (empty if it is gone)."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _session_members(sid: int) -> list[int]:
    """Every process whose session id is `sid` (full /proc scan; catches re-parented orphans)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(name))
    return members


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0  # gone, or a zombie / kernel thread without VmRSS


def _probe_children_file() -> bool:
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


class TreeRssSampler(threading.Thread):
    """Samples the summed VmRSS of a process and all its descendants every `interval` seconds.

    The tree is walked through /proc/<pid>/task/*/children; every FULL_SCAN_EVERY samples (and
    whenever the children files are unavailable) /proc is also scanned for members of the root's
    session, so descendants re-parented to init are still counted (the root is started with its own
    session)."""

    def __init__(self, root: int, interval: float = SAMPLE_INTERVAL_S):
        super().__init__(daemon=True)
        self.root = root
        self.interval = interval
        self.peak_kb = 0
        self.peak_processes = 0
        self.samples = 0
        self._stop_event = threading.Event()
        self._children_ok = _probe_children_file()
        self._orphans: set[int] = set()

    def _tree(self, full_scan: bool) -> set[int]:
        pids: set[int] = set()
        if self._children_ok:
            todo = [self.root, *self._orphans]
            while todo:
                pid = todo.pop()
                if pid in pids:
                    continue
                pids.add(pid)
                todo.extend(_children(pid))
        if full_scan or not self._children_ok:
            members = set(_session_members(self.root))
            self._orphans = members - pids
            pids |= members
        return pids

    def sample(self) -> None:
        full_scan = self.samples % FULL_SCAN_EVERY == 0
        pids = self._tree(full_scan)
        total = sum(_rss_kb(pid) for pid in pids)
        self.samples += 1
        if total > self.peak_kb:
            self.peak_kb = total
        self.peak_processes = max(self.peak_processes, len(pids))

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def child_env(checkout: str = REPO_ROOT) -> dict:
    """The environment of every subprocess: the checkout importable (this one unless another is
    compared with it), TensorFlow's log quiet."""
    env = dict(os.environ)
    env["PYTHONPATH"] = checkout + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def tail(path: str, limit: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _parse_result(stdout_path: str) -> dict | None:
    """The script workers' tagged JSON line, or the elapsed time in the pipeline CLI's summary."""
    try:
        with open(stdout_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    lines = [line for line in text.splitlines() if line.startswith(RESULT_TAG)]
    if lines:
        return json.loads(lines[-1][len(RESULT_TAG) :])
    elapsed = PIPELINE_ELAPSED.search(text)
    return {"work_s": float(elapsed.group(1))} if elapsed else None


def logged_after(stderr_path: str, started: float, line: re.Pattern) -> float | None:
    """Seconds from `started` (time.time() at launch) to the timestamp of the last log line that
    `line` matches (FIRST_READ: ReadImages' first line, its first image read; READS_DONE: the end
    of its converting phase); None if the run logged none."""
    try:
        with open(stderr_path, encoding="utf-8", errors="replace") as f:
            found = line.findall(f.read())
    except OSError:
        return None
    if not found:
        return None
    return datetime.datetime.strptime(found[-1], "%Y-%m-%d %H:%M:%S,%f").timestamp() - started


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[int, bool]:
    """(exit status, timed out): past `timeout`, the whole process group is killed."""
    try:
        return proc.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group we started (start_new_session)
        except ProcessLookupError:
            pass
        return proc.wait(), True


def run_measured(cmd: list[str], log_dir: str, timeout: float, checkout: str = REPO_ROOT) -> dict:
    """Runs `cmd` in its own session, in `checkout` with its code first on the path, timing it and
    sampling its process tree's RSS."""
    stdout_path = os.path.join(log_dir, "stdout.txt")
    stderr_path = os.path.join(log_dir, "stderr.txt")
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        started, t0 = time.time(), time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=checkout, env=child_env(checkout), stdout=out, stderr=err, start_new_session=True
        )
        sampler = TreeRssSampler(proc.pid)
        sampler.start()
        rc, timed_out = _wait(proc, timeout)
        wall = time.perf_counter() - t0
        usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        sampler.stop()
    # CPU time of the process and of every descendant it waited for: robust to other load.
    system = usage1.ru_stime - usage0.ru_stime
    return {
        "cpu_s": usage1.ru_utime - usage0.ru_utime + system,
        "sys_s": system,
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": wall,
        "peak_rss_mb": sampler.peak_kb * 1024 / 1e6,
        "peak_processes": sampler.peak_processes,
        "rss_samples": sampler.samples,
        "result": _parse_result(stdout_path),
        "first_read_s": logged_after(stderr_path, started, FIRST_READ),
        "reads_done_s": logged_after(stderr_path, started, READS_DONE),
        "stdout_path": stdout_path,
        "stderr_path": stderr_path,
    }
