#!/usr/bin/env python3
"""Time planning (listing the input before a run) against a GCS that pages as GCS does, and
estimate what converting a million images costs on Dataflow.

Usage::

    python scripts/bench_planning.py [--sizes 10000,100000] [--folders 1000] [--latencies 0,0.1]
                                     [--kinds images,image_csv,one_folder] [--threads 1,default]
                                     [--baseline DIR] [--repeats 1]
                                     [--json out.json] [--docs docs/performance.md]

For each size, a GCS stand-in (tests/gcs_list_stand_in.py, a loopback server in this process)
serves a synthetic bucket of that many objects, ``gs://bench/images/class<f>/img<i>.jpg`` in
``--folders`` class folders, in pages of at most 1,000 entries, each list page held back by each
``--latencies`` in turn (seconds; 0.1 is a slow GCS page). For each kind, each setting of
``listing_threads`` (``default``: the config's default) runs ``pipeline.planning.make_plan`` in a
fresh subprocess pointed at the stand-in (``STORAGE_EMULATOR_HOST``), on the kind's config in
configs/ with the input overridden:

* ``images``: ``gs://bench/images``, the class folders;
* ``image_csv``: a local CSV (``image_uri,label``, one row per object, written here once per size)
  whose URIs name the stand-in's objects;
* ``one_folder``: ``gs://bench/images`` of one class folder holding every object (another
  stand-in). Like ``images``, it is one listing of the prefix in name ranges side by side; what
  differs is how the names spread, which is where the ranges are cut.

Per run it prints: the time ``make_plan`` took (``plan s``) and its speed-up over one listing
thread; the CPU seconds (user + system) of ``make_plan``, per object (``plan CPU µs/object``), and
of the whole subprocess (imports included); the subprocess' peak RSS after its imports and at its
end (its own VmHWM); the list requests the stand-in answered and the most it held in flight at
once (its counters, read here after the subprocess exits: the server runs in this process, so its
CPU is not the subprocess'); and a check: every object planned, and the same plan (listing
fingerprint, bytes per split, labels) in every run of the kind and size.

``--baseline DIR`` plans each run with another checkout's planner too (one made with
``git archive COMMIT | tar -x -C DIR``), the two taking turns, so both see the same load; the
check then also says whether both planned alike (the fingerprint left out where the baseline makes
it another way), and ``vs baseline's 1`` is each run's speed-up over the baseline's planner with one
listing thread. A baseline from before ``listing_threads`` lists one request at a time, so it runs
once per kind, size and latency, as one thread. ``--repeats N`` runs each N times (taking turns
again) and prints the medians of the times.

Then an estimate of Dataflow's cost per million images: vCPU-hours at a per-core conversion
rate, the memory those workers hold, and the shuffle of each record once (about its input
bytes), priced at list prices. Every one of those is a flag, printed as an input: measure the
rate with ``scripts/benchmark.py --variants pipeline_1core`` on your images, and check the prices.

With ``--docs PATH``, both tables go into that markdown page too, into its blocks ``planning`` and
``dataflow-cost``, each with this command and the machine (bench_docs).

The stand-in's own CPU (about 30 ms per page of 1,000 objects) shares the machine with the
subprocess: on 2 cores it slows the listing threads only a little.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import time

from bench_docs import check_blocks, invoked_command, markdown_table, this_machine, write_tables
from bench_measure import run_measured, tail
from bench_settings import REPO_ROOT, RESULT_TAG

KINDS = ("images", "image_csv", "one_folder")
CONFIGS = {"images": "images", "image_csv": "image_csv", "one_folder": "images"}  # each kind's config in configs/
DOCS_BLOCKS = ("planning", "dataflow-cost")  # the blocks --docs writes: the runs, the cost estimate
BUCKET, ROOT = "bench", "images"
# Inputs of the cost estimate, each a flag: (default, what it is and where the default comes from).
RATE_SOURCE = "pipeline_1core of scripts/benchmark.py, 2,000 photos, an idle 2-core Intel Xeon, 2026-11-26"
IMAGE_KB_SOURCE = "docs/performance.md's corpus: 196 MB of 2,000 photos"
GB_PER_VCPU_SOURCE = "n1-standard machines"
PRICE_SOURCE = "Dataflow list prices, batch, us-central1: check the current ones for your region"


def _numbers(kind):
    return lambda text: [kind(word) for word in text.split(",") if word.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--sizes", type=_numbers(int), default="10000,100000", help="objects in the bucket, each")
    parser.add_argument("--folders", type=int, default=1000, help="class folders the objects are spread over")
    parser.add_argument("--latencies", type=_numbers(float), default="0,0.1", help="seconds each list page waits")
    parser.add_argument("--kinds", type=lambda t: t.split(","), default=",".join(KINDS), help="what is planned")
    parser.add_argument(
        "--threads", type=lambda t: t.split(","), default="1,default", help="listing_threads settings compared"
    )
    parser.add_argument("--baseline", help="another checkout whose planner plans each run too, taking turns")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each, taking turns; the medians are shown")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed per run")
    parser.add_argument("--json", default=None, help="also write every figure as JSON to this path")
    parser.add_argument("--docs", default=None, help="also write both tables into this markdown page's blocks")
    cost = parser.add_argument_group("Dataflow cost estimate (inputs)")
    cost.add_argument(
        "--images_per_core_s", type=float, default=296.9, help=f"conversion rate per vCPU ({RATE_SOURCE})"
    )
    cost.add_argument("--image_kb", type=float, default=98.0, help=f"mean input image size ({IMAGE_KB_SOURCE})")
    cost.add_argument("--gb_per_vcpu", type=float, default=3.75, help=f"worker memory per vCPU ({GB_PER_VCPU_SOURCE})")
    cost.add_argument("--vcpu_hour_usd", type=float, default=0.056, help="price of a vCPU-hour (list price)")
    cost.add_argument("--gb_hour_usd", type=float, default=0.003557, help="price of a GB-hour of memory (list price)")
    cost.add_argument("--shuffle_gb_usd", type=float, default=0.011, help="price of a GB shuffled (list price)")
    # Internal: one timed planning run.
    parser.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--listing_threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--checkout", default=REPO_ROOT, help=argparse.SUPPRESS)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.worker:
        return args
    if not args.sizes or min(args.sizes) < args.folders or args.folders < 1:
        parser.error(f"every size must hold at least one object per folder (--folders {args.folders})")
    unknown = set(args.kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown kind(s) {sorted(unknown)}; choose from {','.join(KINDS)}")
    if any(t != "default" and not t.isdigit() for t in args.threads):
        parser.error("--threads: whole numbers or `default`")
    if args.repeats < 1:
        parser.error("--repeats: at least 1")
    if args.baseline and not os.path.isdir(os.path.join(args.baseline, "pipeline")):
        parser.error(f"--baseline {args.baseline}: not a checkout (no pipeline/ in it)")
    return args


# -- the timed subprocess


def _peak_rss_mb() -> float:
    """This process' peak RSS so far: VmHWM, not getrusage's ru_maxrss, which Linux carries over
    exec from the process that started it (here, the driver and its stand-in)."""
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return kib * 1024 / 1e6


def worker(args: argparse.Namespace) -> int:
    """Plans `args.input` as kind `args.worker` with the planner of `args.checkout` and prints the
    figures as a tagged JSON line."""
    import resource

    sys.path.insert(0, args.checkout)  # before this checkout's (PYTHONPATH): nothing of either is imported yet
    from pipeline.config import Config, load_config
    from pipeline.planning import make_plan

    overrides = {"input": args.input, "output": args.output}
    if "listing_threads" in Config.model_fields:  # an older checkout lists one request at a time
        overrides["listing_threads"] = args.listing_threads
    config = load_config(os.path.join(args.checkout, "configs", f"{CONFIGS[args.worker]}.yaml"), overrides)
    rss_before, before = _peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    plan = make_plan(config)
    plan_s, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "plan_s": plan_s,
        "plan_cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "rss_after_imports_mb": rss_before,
        "peak_rss_mb": _peak_rss_mb(),
        "sources": plan.listing.sources,
        "bytes": plan.listing.bytes,
        "fingerprint": plan.listing.fingerprint,
        "split_bytes": plan.split_bytes,
        "labels": len(plan.label_map),
    }
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0


# -- the driver


def write_csv(gcs, folder: str) -> str:
    """An image CSV naming every object of the stand-in once, labelled by its class folder."""
    path = os.path.join(folder, "images.csv")
    with open(path, "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["image_uri", "label"])
        for i in range(gcs.objects):
            rows.writerow([gcs.uri(i), gcs.name(i).split("/")[-2]])
    return path


def run_one(gcs, kind: str, source: str, threads: int, folder: str, timeout: float, checkout: str) -> dict:
    """One planning subprocess, with `checkout`'s planner, measured, with the stand-in's counters for it."""
    gcs.reset()
    log_dir = tempfile.mkdtemp(prefix=f"{kind}-{threads}-", dir=folder)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--input", source, "--checkout", checkout]
    cmd += ["--listing_threads", str(threads), "--output", os.path.join(folder, "out")]
    measured = run_measured(cmd, log_dir, timeout)
    row = {
        "process_wall_s": measured["wall_s"],
        "process_cpu_s": measured["cpu_s"],
        "list_requests": gcs.list_requests,
        "max_lists_in_flight": gcs.max_lists_in_flight,
        **(measured["result"] or {}),
    }
    if measured["rc"] != 0 or not measured["result"]:
        why = "timed out" if measured["timed_out"] else f"exit {measured['rc']}"
        row["failed"] = f"{why}: {tail(measured['stderr_path'], 600)}"
    return row


def run_size(args, objects: int, thread_settings: list[int], folder: str) -> list[dict]:
    """Every run at one bucket size: against a stand-in of `--folders` class folders, then one of
    one folder."""
    from tests.gcs_emulator import write_fake_adc
    from tests.gcs_list_stand_in import ListStandIn

    # Credentials that resolve at once, as a launcher's do (without any, google-auth looks for a
    # metadata server for about 20 s first: a baseline that lists through Beam's GcsIO would wait).
    os.environ.update(GOOGLE_APPLICATION_CREDENTIALS=write_fake_adc(folder), GOOGLE_CLOUD_PROJECT="bench")
    rows = []
    for folders, kinds in ((args.folders, ("images", "image_csv")), (1, ("one_folder",))):
        kinds = [kind for kind in kinds if kind in args.kinds]
        if not kinds:
            continue
        with ListStandIn(objects, folders, bucket=BUCKET, root=ROOT) as gcs:
            os.environ.update(gcs.env)  # run_measured's subprocesses take this process' environment
            rows += _runs_against(gcs, args, kinds, thread_settings, folder)
    return rows


def _runs_against(gcs, args, kinds: list[str], thread_settings: list[int], folder: str) -> list[dict]:
    rows = []
    sources = {"images": f"gs://{BUCKET}/{ROOT}", "one_folder": f"gs://{BUCKET}/{ROOT}"}
    if "image_csv" in kinds:
        sources["image_csv"] = write_csv(gcs, folder)
    checkouts = [("this", REPO_ROOT)] + ([("baseline", os.path.abspath(args.baseline))] if args.baseline else [])
    for latency in args.latencies:
        gcs.page_latency = latency
        for kind in kinds:
            for threads in thread_settings:
                taking = [(name, path) for name, path in checkouts if threads == 1 or _lists_side_by_side(path)]
                runs: dict[str, list[dict]] = {name: [] for name, _ in taking}
                for _ in range(args.repeats):  # the checkouts take turns, so that both see the same load
                    for name, checkout in taking:
                        row = {"kind": kind, "objects": gcs.objects, "latency_s": latency, "threads": threads}
                        row["checkout"] = name
                        row.update(run_one(gcs, kind, sources[kind], threads, folder, args.timeout, checkout))
                        print(f"  {_progress(row)}", file=sys.stderr, flush=True)
                        runs[name].append(row)
                rows += [medians(runs[name]) for name, _ in taking]
    return rows


def _lists_side_by_side(checkout: str) -> bool:
    """Whether `checkout`'s planner takes `listing_threads`: one from before lists one request at a
    time, so it runs with one thread only."""
    with open(os.path.join(checkout, "pipeline", "config.py")) as f:
        return "listing_threads" in f.read()


TIMES = ("plan_s", "plan_cpu_s", "process_cpu_s", "process_wall_s")  # what --repeats takes the medians of


def medians(runs: list[dict]) -> dict:
    """The last of `runs` with the medians of their times (a failed run's row, if any failed)."""
    failed = [row for row in runs if "failed" in row]
    if failed:
        return failed[0]
    row = dict(runs[-1], repeats=len(runs))
    row.update({key: statistics.median(run[key] for run in runs) for key in TIMES})
    return row


def check(rows: list[dict]) -> None:
    """Each row's `check`: its run planned every object, with the plan (bytes per split, labels,
    and the fingerprint where it is made the same way) every other run of its kind and size found,
    whichever checkout planned it."""
    first: dict[tuple, tuple] = {}
    for row in rows:
        key = (row["kind"], row["objects"])
        method, _, _ = row.get("fingerprint", "").rpartition(":")  # "": an older checkout's, unprefixed
        plan = row.get("split_bytes"), row.get("labels")
        if "failed" in row:
            row["check"] = "FAILED"
        elif row["sources"] != row["objects"]:
            row["check"] = f"WRONG: {row['sources']} sources"
        elif (
            first.setdefault(key, plan) != plan
            or first.setdefault((*key, method), row["fingerprint"]) != row["fingerprint"]
        ):
            row["check"] = "WRONG: another plan"
        else:
            row["check"] = "ok"


def _per_object(rows: list[dict]) -> None:
    for row in rows:
        row["plan_cpu_us"] = row["plan_cpu_s"] / row["objects"] * 1e6 if "plan_cpu_s" in row else None


def _speed_ups(rows: list[dict]) -> None:
    def case(r):
        return r["kind"], r["objects"], r["latency_s"], r["checkout"]

    serial = {case(r): r.get("plan_s") for r in rows if r["threads"] == 1}
    for row in rows:
        base = serial.get(case(row))
        row["speed_up"] = base / row["plan_s"] if base and row.get("plan_s") else None
        base = serial.get((*case(row)[:3], "baseline"))
        row["vs_baseline"] = base / row["plan_s"] if base and row.get("plan_s") else None


def _progress(row: dict) -> str:
    plan = f"{row['plan_s']:.2f} s" if "plan_s" in row else "failed"
    where = f"{row['objects']:,} objects, {row['latency_s'] * 1000:.0f} ms a page, {row['threads']} thread(s)"
    return f"{row['kind']}, {where}, {row['checkout']} checkout: {plan}"


_COLUMNS = (  # heading, key, format
    ("kind", "kind", "{}"),
    ("objects", "objects", "{:,}"),
    ("page ms", "latency_s", "{:.0f}"),
    ("threads", "threads", "{}"),
    ("plan s", "plan_s", "{:.2f}"),
    ("vs 1", "speed_up", "{:.2f}x"),
    ("plan CPU s", "plan_cpu_s", "{:.2f}"),
    ("plan CPU µs/object", "plan_cpu_us", "{:.1f}"),
    ("process CPU s", "process_cpu_s", "{:.2f}"),
    ("RSS after imports MB", "rss_after_imports_mb", "{:.0f}"),
    ("peak RSS MB", "peak_rss_mb", "{:.0f}"),
    ("list requests", "list_requests", "{:,}"),
    ("most in flight", "max_lists_in_flight", "{}"),
    ("check", "check", "{}"),
)


def runs_table(rows: list[dict]) -> str:
    """Every run as a markdown table; with a baseline, which checkout planned it too."""
    columns = _COLUMNS
    if any(row["checkout"] != "this" for row in rows):
        which, speed_up = ("checkout", "checkout", "{}"), ("vs baseline's 1", "vs_baseline", "{:.2f}x")
        columns = (*_COLUMNS[:4], which, *_COLUMNS[4:6], speed_up, *_COLUMNS[6:])

    def cell(row, key, spec):
        value = row.get(key)
        if value is None:
            return "-"
        return spec.format(value * 1000 if key == "latency_s" else value)

    align = "".join("l" if key in ("kind", "checkout", "check") else "r" for _, key, _ in columns)
    cells = [[cell(row, key, spec) for _, key, spec in columns] for row in rows]
    return markdown_table([heading for heading, _, _ in columns], cells, align)


def print_failures(rows: list[dict]) -> None:
    for row in rows:
        if "failed" in row:
            print(f"\nFAILED: {_progress(row)}\n{row['failed']}")


def dataflow_cost(args) -> dict:
    """Per million images: vCPU-hours at the per-core rate, the memory beside them, the shuffle
    of every record once (about its input bytes), each priced."""
    vcpu_hours = 1e6 / args.images_per_core_s / 3600
    gb_hours = vcpu_hours * args.gb_per_vcpu
    shuffle_gb = 1e6 * args.image_kb * 1e3 / 1e9
    usd = {
        "vcpu": vcpu_hours * args.vcpu_hour_usd,
        "memory": gb_hours * args.gb_hour_usd,
        "shuffle": shuffle_gb * args.shuffle_gb_usd,
    }
    return {"vcpu_hours": vcpu_hours, "gb_hours": gb_hours, "shuffle_gb": shuffle_gb, "usd": usd}


def cost_table(args, cost: dict) -> str:
    """The estimate as a markdown table: what is bought, how much, at what cost; then its inputs."""
    usd = cost["usd"]
    rows = [
        ["vCPU", f"{cost['vcpu_hours']:.3f} vCPU-hours", f"${usd['vcpu']:.3f}"],
        ["memory", f"{cost['gb_hours']:.3f} GB-hours", f"${usd['memory']:.3f}"],
        ["shuffle, each record once", f"{cost['shuffle_gb']:.1f} GB", f"${usd['shuffle']:.3f}"],
        ["total (workers' disks and start-up not counted)", "", f"${sum(usd.values()):.3f}"],
    ]
    inputs = (
        f"Inputs: {args.images_per_core_s:g} images/s per vCPU (`--images_per_core_s`: {RATE_SOURCE}); "
        f"{args.image_kb:g} kB per image (`--image_kb`: {IMAGE_KB_SOURCE}); "
        f"{args.gb_per_vcpu:g} GB per vCPU (`--gb_per_vcpu`: {GB_PER_VCPU_SOURCE}); "
        f"${args.vcpu_hour_usd:g} per vCPU-hour, ${args.gb_hour_usd:g} per GB-hour, ${args.shuffle_gb_usd:g} per GB "
        f"shuffled ({PRICE_SOURCE})."
    )
    return markdown_table(["per million images", "quantity", "list price"], rows) + "\n\n" + inputs


def print_cost(args, cost: dict) -> None:
    usd = cost["usd"]
    print("\nDataflow cost per million images (an estimate from the inputs below):")
    print(f"  input: {args.images_per_core_s:g} images/s per vCPU (--images_per_core_s; {RATE_SOURCE})")
    print(f"  input: {args.image_kb:g} kB per image (--image_kb; {IMAGE_KB_SOURCE})")
    print(f"  input: {args.gb_per_vcpu:g} GB of memory per vCPU (--gb_per_vcpu; {GB_PER_VCPU_SOURCE})")
    print(
        f"  input: ${args.vcpu_hour_usd:g} per vCPU-hour, ${args.gb_hour_usd:g} per GB-hour, "
        f"${args.shuffle_gb_usd:g} per GB shuffled (--vcpu_hour_usd, --gb_hour_usd, --shuffle_gb_usd; {PRICE_SOURCE})"
    )
    print(f"  vCPU:    {cost['vcpu_hours']:.3f} vCPU-hours  ${usd['vcpu']:.3f}")
    print(f"  memory:  {cost['gb_hours']:.3f} GB-hours    ${usd['memory']:.3f}")
    print(f"  shuffle: {cost['shuffle_gb']:.1f} GB (each record once)  ${usd['shuffle']:.3f}")
    print(f"  total:   ${sum(usd.values()):.3f} per million images (workers' disks and start-up not counted)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if REPO_ROOT not in sys.path:
        sys.path.insert(1, REPO_ROOT)  # the project's packages, after this folder's bench_* modules
    if args.worker:
        return worker(args)
    if args.docs:
        check_blocks(args.docs, DOCS_BLOCKS)
    from pipeline.config import Config

    default = Config.model_fields["listing_threads"].default
    thread_settings = [default if t == "default" else int(t) for t in args.threads]
    machine = this_machine()
    print(f"planning benchmark: {machine}; listing_threads default {default}", file=sys.stderr)
    rows, load_before = [], os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-planning-") as folder:
        for objects in args.sizes:
            rows += run_size(args, objects, thread_settings, folder)
    load = " ".join(f"{before:.2f}/{after:.2f}" for before, after in zip(load_before, os.getloadavg(), strict=True))
    check(rows)
    _per_object(rows)
    _speed_ups(rows)
    repeats = f"; medians of {args.repeats} runs each" if args.repeats > 1 else ""
    print(f"Planning against the GCS stand-in, {args.folders:,} class folders (one_folder: 1){repeats}; {machine}")
    table = runs_table(rows)
    print(table)
    print(f"Load average (1, 5, 15 min), before/after: {load}")
    print_failures(rows)
    cost = dataflow_cost(args)
    print_cost(args, cost)
    if args.docs:
        command = invoked_command(__file__, sys.argv[1:] if argv is None else argv)
        write_tables(args.docs, dict(zip(DOCS_BLOCKS, (table, cost_table(args, cost)), strict=True)), command, machine)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "args": vars(args), "runs": rows, "dataflow_cost": cost}, f, indent=1)
    return 0 if all(row["check"] == "ok" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
