"""Every run of every variant, round-robin (run 1 of each variant, then run 2, ...), so that drift in
the machine's speed spreads over all variants alike; each run's output is checked once, untimed."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import sys
import tempfile

from bench_measure import run_measured, tail
from bench_settings import BENCHMARK_SCRIPT, NAME_WIDTH, PINNED_CPUS, PIPELINE_CONFIGS, PIPELINE_VARIANTS


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What every run of a benchmark shares."""

    corpus: dict  # the corpus' path and corpus_stats
    extensions: tuple[str, ...]  # of the corpus' image files, for the script variants' listing
    pipeline_args: list[str]
    runs: int
    timeout: float
    verify: bool
    keep: bool
    tmp: str | None


def pinning(variant: str) -> list[str]:
    """The `taskset` words that pin a variant to its PINNED_CPUS (none for the others)."""
    if variant not in PINNED_CPUS:
        return []
    taskset = shutil.which("taskset")
    if taskset is None:
        raise SystemExit(f"variant {variant} runs under taskset, which is not installed (util-linux)")
    return [taskset, "-c", ",".join(map(str, PINNED_CPUS[variant]))]


def variant_command(variant: str, settings: RunSettings, dest: str) -> list[str]:
    corpus = settings.corpus["path"]
    if variant in PIPELINE_VARIANTS:
        cli = ["--input", corpus, "--output", dest, "--overwrite", *PIPELINE_VARIANTS[variant]]
        return [*pinning(variant), sys.executable, "-m", "pipeline", *cli, *settings.pipeline_args]
    worker = ["--worker", variant, "--corpus", corpus, "--dest", dest, "--extensions", ",".join(settings.extensions)]
    return [*pinning(variant), sys.executable, BENCHMARK_SCRIPT, *worker]


def verify_output(dest: str, log_dir: str, timeout: float) -> dict:
    """What the `count` worker finds in a run's output folder."""
    cmd = [sys.executable, BENCHMARK_SCRIPT, "--worker", "count", "--dest", dest]
    vdir = os.path.join(log_dir, "verify")
    os.makedirs(vdir, exist_ok=True)
    measured = run_measured(cmd, vdir, timeout)
    if measured["rc"] != 0 or measured["result"] is None:
        return {"verify_error": tail(measured["stderr_path"], 1500)}
    return measured["result"]


def run_record(run_index: int, measured: dict, corpus: dict) -> dict:
    """One run's figures, as they go into the JSON report."""
    record = {
        "run": run_index,
        "rc": measured["rc"],
        "timed_out": measured["timed_out"],
        "wall_s": measured["wall_s"],
        "cpu_s": measured["cpu_s"],
        "sys_s": measured["sys_s"],
        "cpu_us_per_image": 1e6 * measured["cpu_s"] / corpus["files"],
        "images_per_s": corpus["files"] / measured["wall_s"],
        "mb_per_s": corpus["mb"] / measured["wall_s"],
        "peak_rss_mb": measured["peak_rss_mb"],
        "peak_processes": measured["peak_processes"],
        "rss_samples": measured["rss_samples"],
        "loadavg_after": os.getloadavg()[0],
    }
    result = measured["result"] or {}
    if result.get("work_s"):
        record["work_s"] = result["work_s"]
        record["work_images_per_s"] = corpus["files"] / result["work_s"]
    record["worker"] = {k: v for k, v in result.items() if k != "work_s"}
    # Start-up: until the pipeline reads its first image; for the script variants, until their timed work.
    if measured["first_read_s"] is not None:
        record["startup_s"] = measured["first_read_s"]
        if measured.get("reads_done_s") is not None:  # from its first image read to its last record made
            record["reading_s"] = measured["reads_done_s"] - measured["first_read_s"]
    elif result.get("work_s"):
        record["startup_s"] = measured["wall_s"] - result["work_s"]
    return record


def _status(measured: dict) -> tuple[bool, str]:
    ok = measured["rc"] == 0 and not measured["timed_out"]
    return ok, "ok" if ok else ("TIMED OUT" if measured["timed_out"] else f"FAILED rc={measured['rc']}")


class RoundRobin:
    """Runs the variants and collects their runs, their first outputs' checks and their problems.
    A variant that fails a run is reported with its stderr and skips its remaining runs."""

    def __init__(self, variants: list[str], settings: RunSettings):
        self.variants = variants
        self.settings = settings
        self.runs: dict[str, list[dict]] = {v: [] for v in variants}
        self.problems: dict[str, list[str]] = {v: [] for v in variants}
        self.verified: dict[str, dict] = {}
        self.failed: set[str] = set()

    def run_all(self) -> None:
        for variant in self.variants:
            pinning(variant)  # a missing taskset fails here, before any run
        work_root = tempfile.mkdtemp(prefix="benchmark-", dir=self.settings.tmp)
        try:
            for run_index in range(self.settings.runs):
                for variant in self.variants:
                    if variant not in self.failed:
                        self.run_once(variant, run_index, work_root)
        finally:
            if not self.settings.keep:
                shutil.rmtree(work_root, ignore_errors=True)

    def run_once(self, variant: str, run_index: int, work_root: str) -> None:
        run_dir = os.path.join(work_root, f"{variant}-{run_index}")
        dest = os.path.join(run_dir, "out")
        os.makedirs(run_dir)
        if variant not in PIPELINE_VARIANTS:
            os.makedirs(dest)  # the pipeline creates its own output folder
        command = variant_command(variant, self.settings, dest)
        if variant in PIPELINE_CONFIGS:
            config = os.path.join(run_dir, "config.yaml")
            with open(config, "w", encoding="utf-8") as f:
                f.write(PIPELINE_CONFIGS[variant].format(cores=len(os.sched_getaffinity(0))))
            command += ["--config", config]
        measured = run_measured(command, run_dir, self.settings.timeout)
        record = run_record(run_index, measured, self.settings.corpus)
        ok, status = _status(measured)
        print(
            f"  run {run_index + 1}/{self.settings.runs} {variant:<{NAME_WIDTH}} {status:<10} "
            f"{record['wall_s']:7.2f} s  "
            f"{record['images_per_s']:7.1f} img/s  cpu {record['cpu_s']:6.1f} s (sys {record['sys_s']:4.1f})  "
            f"peak RSS {record['peak_rss_mb']:6.0f} MB  (load {record['loadavg_after']:.1f})",
            flush=True,
        )
        if not ok:
            self.failed.add(variant)
            self.problems[variant].append(
                f"run {run_index + 1} {status}; command: {shlex.join(command)}\n"
                f"stderr (tail):\n{tail(measured['stderr_path'])}"
            )
        elif self.settings.verify and variant not in self.verified:
            self.check_output(variant, dest, run_dir)
        self.runs[variant].append(record)
        if not self.settings.keep:
            shutil.rmtree(dest, ignore_errors=True)

    def check_output(self, variant: str, dest: str, run_dir: str) -> None:
        """Counts the records of a variant's first output against the corpus' file count."""
        check = self.verified[variant] = verify_output(dest, run_dir, self.settings.timeout)
        files = self.settings.corpus["files"]
        if "verify_error" in check:
            self.problems[variant].append(f"verification failed:\n{check['verify_error']}")
        elif check.get("records") != files:
            self.problems[variant].append(f"wrote {check.get('records')} records for {files} input files: {check}")
