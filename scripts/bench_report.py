"""What the benchmark reports: each variant's medians over its runs, its ratios to the two
baselines (throughput to serial_tf, memory to plain_beam) and each pipeline variant's throughput
against the floor on the same cores, as a table on stdout and as JSON."""

from __future__ import annotations

import collections
import datetime
import json
import os
import platform
import statistics
from collections.abc import Iterable
from types import ModuleType

from bench_docs import markdown_table
from bench_settings import FLOOR_VARIANTS, NAME_WIDTH, PINNED_CPUS, PIPELINE_VARIANTS

TABLE_NOTES = (
    "\nimg/s, MB/s: corpus files / input bytes over the subprocess' wall-clock time, start-up included;"
    "\ncpu s: user+system CPU seconds of the process tree (insensitive to other load on the machine);"
    "\nsys s: its system part (on these VMs mostly copying output into the page cache, whose cost varies);"
    "\npeak RSS: summed VmRSS of the process tree, sampled every ~50 ms; img/s work: after imports"
    "\n(pipeline variants: the summary's elapsed); records: TFRecord records counted in the first run's output."
)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(runs: list[dict]) -> dict:
    """A variant's status and the medians of its successful runs."""
    ok = [r for r in runs if r["rc"] == 0 and not r["timed_out"]]
    summary = {"ok_runs": len(ok), "runs": runs}
    if not ok:
        summary["status"] = "failed"
        return summary
    summary["status"] = "ok" if len(ok) == len(runs) else "partial"
    summary["median"] = {
        "wall_s": _median([r["wall_s"] for r in ok]),
        "cpu_s": _median([r["cpu_s"] for r in ok]),
        "sys_s": _median([r["sys_s"] for r in ok]),
        "cpu_us_per_image": _median([r["cpu_us_per_image"] for r in ok]),
        "images_per_s": _median([r["images_per_s"] for r in ok]),
        "mb_per_s": _median([r["mb_per_s"] for r in ok]),
        "peak_rss_mb": _median([r["peak_rss_mb"] for r in ok]),
        "work_images_per_s": _median([r.get("work_images_per_s") for r in ok]),
        "startup_s": _median([r.get("startup_s") for r in ok]),
        "reading_s": _median([r.get("reading_s") for r in ok]),
        "work_s": _median([r.get("work_s") for r in ok]),
    }
    summary["min_images_per_s"] = min(r["images_per_s"] for r in ok)
    summary["max_images_per_s"] = max(r["images_per_s"] for r in ok)
    return summary


def _baseline(results: dict, variant: str, figure: str):
    return results.get(variant, {}).get("median", {}).get(figure)


def _floor_on_same_cpus(variant: str) -> str | None:
    return next((f for f in FLOOR_VARIANTS if PINNED_CPUS.get(f) == PINNED_CPUS.get(variant)), None)


def _vs_floor(variant: str, results: dict) -> dict | None:
    """A pipeline variant's median img/s over those of the floor on the same cores: wall-clock
    (start-up included) and in-job (its summary's elapsed against the floor's work_s); None unless
    both ran."""
    if variant not in PIPELINE_VARIANTS:
        return None
    floor = _floor_on_same_cpus(variant)
    med, floor_med = results[variant].get("median"), results.get(floor, {}).get("median")
    if not med or not floor_med:
        return None
    work, floor_work = med["work_images_per_s"], floor_med["work_images_per_s"]
    reading, floor_work_s = med.get("reading_s"), floor_med.get("work_s")
    return {
        "floor": floor,
        "cores": len(PINNED_CPUS.get(variant, os.sched_getaffinity(0))),
        "wall": med["images_per_s"] / floor_med["images_per_s"],
        "in_job": work / floor_work if work and floor_work else None,
        # from the first image read to the last record made, against all of the floor's work
        "reading": floor_work_s / reading if reading and floor_work_s else None,
    }


def summarize_all(variants: list[str], runs: dict, verified: dict, problems: dict) -> dict:
    """{variant: summary}, with each variant's output check, problems and ratios to the baselines."""
    results = {}
    for variant in variants:
        summary = summarize(runs[variant])
        summary["verify"] = verified.get(variant, {})
        summary["problems"] = problems[variant]
        results[variant] = summary
    base_tp = _baseline(results, "serial_tf", "images_per_s")
    base_rss = _baseline(results, "plain_beam", "peak_rss_mb")
    base_work = _baseline(results, "serial_tf", "work_images_per_s")
    for variant, summary in results.items():
        med = summary.get("median")
        if med:
            work = med["work_images_per_s"]
            summary["ratios"] = {
                "throughput_vs_serial_tf": med["images_per_s"] / base_tp if base_tp else None,
                "work_throughput_vs_serial_tf": work / base_work if base_work and work else None,
                "peak_rss_vs_plain_beam": med["peak_rss_mb"] / base_rss if base_rss else None,
                "vs_floor": _vs_floor(variant, results),
            }
    return results


def _fmt(value, spec: str, suffix: str = "", missing: str | None = "-") -> str | None:
    return missing if value is None else format(value, spec) + suffix


def _table_row(variant: str, summary: dict, base_tp, base_rss) -> str:
    med = summary.get("median")
    if not med:
        return f"{variant:<{NAME_WIDTH}} {summary['ok_runs']:>2}/{len(summary['runs']):<2} FAILED (see below)"
    tp_ratio = med["images_per_s"] / base_tp if base_tp else None
    rss_ratio = med["peak_rss_mb"] / base_rss if base_rss else None
    records = summary.get("verify", {}).get("records")
    spread = f"({summary['min_images_per_s']:.0f}-{summary['max_images_per_s']:.0f})"
    return (
        f"{variant:<{NAME_WIDTH}} {summary['ok_runs']:>2}/{len(summary['runs']):<2} "
        f"{med['images_per_s']:>8.1f} {spread:>13} "
        f"{med['mb_per_s']:>7.1f} {med['peak_rss_mb']:>12.0f} {_fmt(tp_ratio, '.2f', 'x'):>13} "
        f"{_fmt(rss_ratio, '.2f', 'x'):>12} {med['wall_s']:>7.2f} {med['cpu_s']:>7.2f} {med['sys_s']:>6.2f} "
        f"{_fmt(med['work_images_per_s'], '.1f'):>11} {_fmt(records, 'd'):>8}"
    )


def print_table(results: dict, corpus: dict, runs: int) -> None:
    """The table of medians, what its columns mean, then each variant's problems."""
    base_tp = _baseline(results, "serial_tf", "images_per_s")
    base_rss = _baseline(results, "plain_beam", "peak_rss_mb")
    header = (
        f"{'variant':<{NAME_WIDTH}} {'ok':>5} {'img/s':>8} {'(min-max)':>13} {'MB/s':>7} {'peak RSS MB':>12} "
        f"{'vs serial_tf':>13} {'RSS vs beam':>12} {'wall s':>7} {'cpu s':>7} {'sys s':>6} "
        f"{'img/s work':>11} {'records':>8}"
    )
    print()
    print(
        f"corpus: {corpus['path']}: {corpus['files']} files, {corpus['mb']:.1f} MB, "
        f"median {corpus['median_kb']:.1f} kB, {corpus['classes']} classes; "
        f"medians of {runs} run(s) per variant; cpus={os.cpu_count()}"
    )
    print(header)
    print("-" * len(header))
    for variant, summary in results.items():
        print(_table_row(variant, summary, base_tp, base_rss))
    print(TABLE_NOTES)
    work = [
        f"{variant} {summary['ratios']['work_throughput_vs_serial_tf']:.2f}x"
        for variant, summary in results.items()
        if variant in PIPELINE_VARIANTS and summary.get("ratios", {}).get("work_throughput_vs_serial_tf")
    ]
    if work:
        print(f"after start-up (img/s work) vs serial_tf: {', '.join(work)}")
    print_phases(results)
    print_floor_ratios(results)
    print_runner_share(results)
    for variant, summary in results.items():
        for problem in summary.get("problems", []):
            print(f"\n[{variant}] {problem}")


def _medians_line(results: dict, figure: str, what: str) -> None:
    """`what: variant N s, ...` for the variants whose runs have `figure`."""
    found = [
        f"{variant} {summary['median'][figure]:.2f} s"
        for variant, summary in results.items()
        if summary.get("median", {}).get(figure) is not None
    ]
    if found:
        print(f"{what}: {', '.join(found)}")


def print_phases(results: dict) -> None:
    """Each variant's start-up: the pipeline's until its first image is read (imports, planning,
    building and translating the job, listing the sources), the scripts' until their timed work;
    and the pipeline's reading, from its first image read to its last record made."""
    _medians_line(results, "startup_s", "start-up (pipeline: until its first image is read; scripts: until their work)")
    _medians_line(results, "reading_s", "reading (pipeline: from its first image read to its last record made)")


def print_floor_ratios(results: dict) -> None:
    """One line per pipeline variant that ran beside the floor on its cores."""
    for variant, summary in results.items():
        ratio = summary.get("ratios", {}).get("vs_floor")
        if ratio:
            cores = f"{ratio['cores']} core{'s' if ratio['cores'] > 1 else ''}"
            print(
                f"{variant} / {ratio['floor']} ({cores}): wall {ratio['wall']:.2f}x, "
                f"in-job {_fmt(ratio['in_job'], '.2f', 'x')}, reading {_fmt(ratio['reading'], '.2f', 'x')}"
            )


def print_runner_share(results: dict) -> None:
    """What a one-core run costs besides the per-image work (runner_1core), beside the floor's
    time for all of it and the room a 0.9x-the-floor target leaves."""
    runner = _baseline(results, "runner_1core", "work_images_per_s")
    floor = _baseline(results, "floor_1core", "work_images_per_s")
    if runner and floor:
        print(
            f"runner_1core (the pipeline with a ready Example for every source): {1000 / runner:.2f} ms per image "
            f"in-job on one core; floor_1core: {1000 / floor:.2f} ms for all the necessary work; "
            f"0.9x the floor leaves {1000 / (0.9 * floor) - 1000 / floor:.2f} ms per image beyond it"
        )


def print_per_image_costs(costs: dict, results: dict, runs: int) -> None:
    """The per-image costs, each measured on one thread, with their share of the default
    pipeline's CPU time per image (not of its wall-clock time, which its threads share)."""
    pipeline_cpu_us = _baseline(results, "pipeline", "cpu_us_per_image")

    def share(key: str) -> str:
        if not pipeline_cpu_us:
            return ""
        return f" ({100 * costs[key] / pipeline_cpu_us:.0f}% of the pipeline's CPU time per image)"

    print(
        f"\nper image (median of {runs}, CPU time on one thread): integrity check: header-only dimensions "
        f"{costs['header_only_us']:.0f} us, check_image {costs['check_image_us']:.0f} us{share('check_image_us')}; "
        f"GZIP: stdlib zlib {costs['gzip_zlib_us']:.0f} us, ISA-L {costs['gzip_isal_us']:.0f} us, "
        f"stored blocks (what the pipeline writes for payloads that do not compress) {costs['gzip_stored_us']:.0f} us; "
        f"XXH3-128 of the source (to find copies) {costs['content_digest_us']:.0f} us{share('content_digest_us')}; "
        f"read-back before publishing {costs['read_back_us']:.0f} us{share('read_back_us')}"
    )


def print_load_note(load_start: tuple[float, float, float]) -> None:
    """Warns when the machine was already busy: the figures then understate every variant."""
    if load_start[0] > 0.5 * (os.cpu_count() or 1):
        print(f"\nnote: the machine was busy when the benchmark started (load average {load_start[0]:.2f}).")


BYTECODE_NOTE_PACKAGES = 6  # the bytecode note names the packages with the most uncached modules, up to this many


def without_bytecode(modules: Iterable[ModuleType]) -> list[str]:
    """The modules, of those loaded from source files, whose compiled bytecode is not cached: every
    run compiles them again (installed with `pip install --no-compile`, or a source tree, while
    bytecode writes are off or not possible), a start-up cost that an installation with bytecode
    does not pay."""
    return sorted(
        module.__name__
        for module in modules
        if isinstance(getattr(module, "__cached__", None), str) and not os.path.exists(module.__cached__)
    )


def print_bytecode_note(uncached: list[str]) -> None:
    """Warns when modules imported here (Beam's, the project's) are compiled at every start, naming
    their top-level packages: a few of the project's own cost little, all of Beam's a lot."""
    if uncached:
        packages = collections.Counter(name.partition(".")[0] for name in uncached).most_common()
        counts = ", ".join(f"{package} {count}" for package, count in packages[:BYTECODE_NOTE_PACKAGES])
        if len(packages) > BYTECODE_NOTE_PACKAGES:
            counts += f", {len(packages) - BYTECODE_NOTE_PACKAGES} more packages"
        print(
            f"\nnote: {len(uncached)} module(s) imported here have no cached bytecode ({counts}): every run "
            "compiles them, which the start-up figures include and an installation with bytecode does not pay "
            "(pip compiles unless given --no-compile; `python -m compileall DIR` compiles a source tree or a "
            "--target folder)."
        )


def write_report(path: str, settings, loadavg: tuple, results: dict, costs: dict, uncached: list[str]) -> None:
    """Writes every figure, each run included, as JSON. `settings`: the runs' bench_runs.RunSettings;
    `loadavg`: the load averages at the start and at the end of the benchmark; `uncached`: the
    modules imported here without cached bytecode (without_bytecode)."""
    report = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "corpus": settings.corpus,
        "runs_per_variant": settings.runs,
        "pipeline_args": settings.pipeline_args,
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_start": loadavg[0],
            "loadavg_end": loadavg[1],
            "modules_without_bytecode": uncached,
        },
        "variants": results,
        "per_image_costs": costs,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, sort_keys=True)
    print(f"\nwrote {path}")


# What each variant is, as the docs' tables name it (the module docstring of benchmark.py has the detail).
DOCS_LABELS = {
    "pipeline": "`pipeline`: the CLI as it is",
    "pipeline_threads": "`pipeline_threads`: images converted on threads (`image.local_processes: 0`)",
    "pipeline_processes": "`pipeline_processes`: a converting process per core (`image.local_processes`)",
    "pipeline_uncompressed": "`pipeline_uncompressed`: `--compression none`",
    "pipeline_parallel": "`pipeline_parallel`: `--direct_num_workers 0` (FnApiRunner, a worker per core)",
    "pipeline_1core": "`pipeline_1core`: on one core (`taskset -c 0`)",
    "pipeline_write_to_tfrecord": (
        "`pipeline_write_to_tfrecord`: records grouped by shard before writing "
        "(`image.local_write_while_reading: false`, as on Dataflow)"
    ),
    "pipeline_write_to_tfrecord_1core": "`pipeline_write_to_tfrecord_1core`: the same on one core",
    "serial_tf": (
        "`serial_tf`: the TF tutorials' serial loop (`read_file`, `decode_jpeg` for the dimensions, "
        "`TFRecordWriter` GZIP)"
    ),
    "plain_beam": (
        "`plain_beam`: plain Beam (`Create -> Reshuffle -> ParDo(read, TF dimensions, Example) -> Reshuffle "
        "-> WriteToTFRecord`)"
    ),
    "floor": "`floor`: the necessary work, a process per core, no Beam",
    "floor_1core": "`floor_1core`: the floor on one core",
    "runner_1core": "`runner_1core`: the pipeline on one core with a ready Example for every source",
}
# The docs' per-image costs: (key in measure_per_image_costs' figures, what it is).
DOCS_COSTS = (
    ("header_only_us", "image dimensions from the header alone"),
    ("check_image_us", "integrity check (`check_image`: header, then a 1/8-scale draft decode of a JPEG)"),
    ("gzip_zlib_us", "GZIP through the stdlib's zlib"),
    ("gzip_isal_us", "GZIP through ISA-L"),
    ("gzip_stored_us", "GZIP as stored blocks (what the pipeline writes for payloads that do not compress)"),
    ("content_digest_us", "XXH3-128 digest of the source (finds copies)"),
    ("read_back_us", "read-back before publishing"),
)


def docs_table_names(files: int) -> tuple[str, str]:
    """The page's blocks for a corpus of `files` images: the variants, the per-image costs."""
    return f"conversion-{files}", f"conversion-{files}-costs"


def _ratio_to(summary: dict, base, figure: str):
    med = summary.get("median")
    return med[figure] / base if med and base else None


def _floor_ratio(summary: dict, figure: str):
    return (summary.get("ratios", {}).get("vs_floor") or {}).get(figure)


def _throughput(summary: dict) -> str:
    spread = f"({summary['min_images_per_s']:.0f}-{summary['max_images_per_s']:.0f})"
    return f"{summary['median']['images_per_s']:.1f} {spread}"


def variants_table(results: dict) -> str:
    """Each variant's medians as a markdown table, with the ratios whose baselines ran beside it."""
    base_tp = _baseline(results, "serial_tf", "images_per_s")
    base_rss = _baseline(results, "plain_beam", "peak_rss_mb")
    columns = [  # heading, figure of a variant's summary (None: not measured)
        ("img/s (min-max)", _throughput),
        ("CPU s", lambda s: f"{s['median']['cpu_s']:.2f}"),
        ("peak RSS", lambda s: f"{s['median']['peak_rss_mb']:,.0f} MB"),
        ("start-up s", lambda s: _fmt(s["median"]["startup_s"], ".2f", missing=None)),
        ("vs serial loop", lambda s: _fmt(_ratio_to(s, base_tp, "images_per_s"), ".2f", "x", None)),
        ("RSS vs plain Beam", lambda s: _fmt(_ratio_to(s, base_rss, "peak_rss_mb"), ".2f", "x", None)),
        ("vs floor, wall", lambda s: _fmt(_floor_ratio(s, "wall"), ".2f", "x", None)),
        ("vs floor, after start-up", lambda s: _fmt(_floor_ratio(s, "in_job"), ".2f", "x", None)),
    ]
    ran = {variant: summary for variant, summary in results.items() if summary.get("median")}
    cells = {heading: [figure(summary) for summary in ran.values()] for heading, figure in columns}
    shown = [heading for heading, _ in columns if any(cell is not None for cell in cells[heading])]
    rows = [[DOCS_LABELS[variant], *(cells[heading][i] or "" for heading in shown)] for i, variant in enumerate(ran)]
    failed = [variant for variant in results if variant not in ran]
    table = markdown_table(["variant", *shown], rows)
    return "\n\n".join([table, *([f"No successful run: {', '.join(failed)}."] if failed else []), _load(results)])


def _load(results: dict) -> str:
    return load_line([run["loadavg_after"] for summary in results.values() for run in summary["runs"]])


def load_line(loads: list[float]) -> str:
    """The load the runs shared the machine with: above its core count, other processes slowed
    every variant, so the ratios side by side hold and the absolute figures understate."""
    return (
        f"Load average after each run: median {statistics.median(loads):.1f} ({min(loads):.1f}-{max(loads):.1f}) "
        f"on {len(os.sched_getaffinity(0))} usable cores."
    )


def costs_table(costs: dict, results: dict) -> str:
    """The per-image costs as a markdown table, each beside the default pipeline's CPU per image."""
    pipeline_cpu_us = _baseline(results, "pipeline", "cpu_us_per_image")
    rows = [
        [what, f"{costs[key]:,.0f}", f"{100 * costs[key] / pipeline_cpu_us:.0f}%" if pipeline_cpu_us else ""]
        for key, what in DOCS_COSTS
    ]
    return markdown_table(["per image, CPU time on one thread", "us", "of the pipeline's CPU per image"], rows)


def docs_tables(results: dict, costs: dict, files: int) -> dict[str, str]:
    """{block name: markdown table} for the page (bench_docs.write_tables)."""
    variants, per_image = docs_table_names(files)
    return {variants: variants_table(results), per_image: costs_table(costs, results)}
