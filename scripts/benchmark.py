#!/usr/bin/env python3
"""Benchmark the conversion pipeline against reference ways of writing the same TFRecords.

Usage::

    python scripts/benchmark.py [--corpus bench/photos]
                                [--variants pipeline,pipeline_parallel,serial_tf,plain_beam,floor]
                                [--runs 3] [--pipeline_args "--some_flag value"] [--json results.json]

Runs every variant ``--runs`` times, each run in its own subprocess, round-robin (run 1 of every
variant, then run 2, ...), on a folder of ``<class>/<image>`` files (default ``bench/photos``, built
with ``scripts/make_photo_corpus.py`` when missing), and reports per variant the MEDIAN over its runs
of:

* images/s and MB/s: the corpus' file count and input bytes divided by the wall-clock time of the
  whole subprocess, interpreter start to exit (imports and runner start-up included, as a user of
  the CLI sees it). The time after imports is also reported (``img/s work``): for the script
  variants from their own clock, for the pipeline variants the ``elapsed`` of the CLI's summary
  (job construction and run, after imports and planning).
* peak RSS: the maximum, over samples taken every ~50 ms, of the summed VmRSS of the subprocess and
  all its descendants (read from /proc; shared pages are counted once per process).

plus ratios: throughput vs ``serial_tf`` and peak RSS vs ``plain_beam``.

Variants:

``pipeline``    our CLI: ``python -m pipeline --input CORPUS --output TMPDIR --overwrite`` plus the
                words of ``--pipeline_args`` (give it as ``--pipeline_args="--flag value"`` when it
                starts with a dash and has no space). A run that fails is reported with its stderr
                and the variant's remaining runs are skipped.
``pipeline_parallel``  the same with ``--direct_num_workers 0``: the FnApiRunner with an
                in-process worker per core, instead of the CLI's default single-threaded runner
                (see pipeline/runners.py).
``serial_tf``   the TensorFlow tutorials' serial loop: ``tf.io.read_file``, ``tf.io.decode_jpeg`` for
                the dimensions, a ``tf.train.Example`` (image/encoded, height, width, channels,
                label, class text, filename, format) written with
                ``tf.io.TFRecordWriter(path, options="GZIP")`` to one file.
``plain_beam``  the plain Beam pipeline on the DirectRunner (default options):
                ``Create(paths) | Reshuffle() | ParDo(read bytes, decode_jpeg for the dimensions, build
                the Example) | Reshuffle() | WriteToTFRecord(GZIP, num_shards=8)``.
``floor``       reads the same bytes and gzip-compresses them (zlib level 6) in a multiprocessing
                pool of ``os.cpu_count()`` workers, discarding the output: roughly the least work
                any converter using the stdlib's zlib must do (the pipeline's ISA-L gzip costs
                about a tenth of that: see the per-image line below the table).

Before timing, the corpus is read once (so every variant sees a warm page cache) and TensorFlow and
Beam are imported once in a throw-away process (so the first run does not pay for a cold disk
cache). After the first run of each variant its output is checked, untimed: the TFRecord records are
counted (for ``pipeline``, those of the shards listed in ``manifest.json``) and compared with the
corpus' file count (``--no-verify`` skips this).

Prints a table, then two per-image costs measured in this process on one thread (the integrity
check against header-only dimensions; GZIP through ISA-L against the stdlib's zlib), to stdout and,
with ``--json PATH``, writes every figure (each run included) there.
This is a script, not a test: nothing in the test suite times anything.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.join(REPO_ROOT, "bench", "photos")
VARIANTS = ("pipeline", "pipeline_parallel", "serial_tf", "plain_beam", "floor")
PIPELINE_VARIANTS = {"pipeline": [], "pipeline_parallel": ["--direct_num_workers", "0"]}
PIPELINE_ELAPSED = re.compile(r"^\s*elapsed ([0-9.]+) s,", re.MULTILINE)
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")
RESULT_TAG = "BENCHMARK_RESULT "
SAMPLE_INTERVAL_S = 0.05


# ----------------------------------------------------------------------------------------------
# Corpus
# ----------------------------------------------------------------------------------------------


def list_corpus(corpus: str) -> list[tuple[str, str]]:
    """Sorted (absolute path, label) of the image files in `corpus`'s class sub-folders."""
    items = []
    for label in sorted(os.listdir(corpus)):
        folder = os.path.join(corpus, label)
        if not os.path.isdir(folder):
            continue
        for root, dirs, names in os.walk(folder):
            dirs.sort()
            for name in sorted(names):
                if name.lower().endswith(IMAGE_EXTENSIONS):
                    items.append((os.path.abspath(os.path.join(root, name)), label))
    return items


def corpus_stats(items: list[tuple[str, str]]) -> dict:
    sizes = [os.path.getsize(path) for path, _ in items]
    return {
        "files": len(items),
        "bytes": sum(sizes),
        "mb": sum(sizes) / 1e6,
        "median_kb": statistics.median(sizes) / 1e3 if sizes else 0.0,
        "classes": len({label for _, label in items}),
    }


def warm_page_cache(items: list[tuple[str, str]]) -> None:
    for path, _ in items:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


# ----------------------------------------------------------------------------------------------
# Workers (run in the timed subprocesses: `benchmark.py --worker VARIANT --corpus C --dest D`)
# ----------------------------------------------------------------------------------------------


def _label_ids(items):
    return {label: i for i, label in enumerate(sorted({label for _, label in items}))}


def _image_format(path: str) -> bytes:
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    return b"jpeg" if ext in ("jpg", "jpeg") else ext.encode()


def _make_example(tf, raw: bytes, shape, path: str, label: str, label_id: int):
    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def i(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))

    return tf.train.Example(
        features=tf.train.Features(
            feature={
                "image/encoded": b(raw),
                "image/height": i(shape[0]),
                "image/width": i(shape[1]),
                "image/channels": i(shape[2]),
                "image/label": i(label_id),
                "image/class/text": b(label.encode()),
                "image/filename": b(os.path.basename(path).encode()),
                "image/format": b(_image_format(path)),
            }
        )
    )


def _decode_shape(tf, raw, path: str):
    """The decoded image's (height, width, channels): tf.io.decode_jpeg for JPEG files, as in the
    tutorials (the photo corpus is all JPEG); tf.io.decode_image for anything else."""
    if _image_format(path) == b"jpeg":
        return tf.io.decode_jpeg(raw).shape
    return tf.io.decode_image(raw, expand_animations=False).shape


def worker_serial_tf(items, dest) -> dict:
    import tensorflow as tf

    t0 = time.perf_counter()
    ids = _label_ids(items)
    written = 0
    with tf.io.TFRecordWriter(os.path.join(dest, "data.tfrecord.gz"), options="GZIP") as writer:
        for path, label in items:
            raw = tf.io.read_file(path)
            shape = _decode_shape(tf, raw, path)
            example = _make_example(tf, raw.numpy(), shape, path, label, ids[label])
            writer.write(example.SerializeToString())
            written += 1
    return {"work_s": time.perf_counter() - t0, "written": written}


def worker_plain_beam(items, dest) -> dict:
    import apache_beam as beam
    import tensorflow as tf  # noqa: F401  (imported before timing, like the other variants)
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

    class ToExample(beam.DoFn):
        def setup(self):
            import tensorflow

            self.tf = tensorflow

        def process(self, item):
            path, label, label_id = item
            with FileSystems.open(path) as f:
                raw = f.read()
            shape = _decode_shape(self.tf, raw, path)
            yield _make_example(self.tf, raw, shape, path, label, label_id).SerializeToString()

    t0 = time.perf_counter()
    ids = _label_ids(items)
    elements = [(path, label, ids[label]) for path, label in items]
    options = PipelineOptions(["--runner=DirectRunner"])
    with beam.Pipeline(options=options) as p:
        _ = (
            p
            | "Paths" >> beam.Create(elements)
            | "Spread" >> beam.Reshuffle()
            | "ToExample" >> beam.ParDo(ToExample())
            | "Gather" >> beam.Reshuffle()
            | "Write"
            >> beam.io.WriteToTFRecord(
                os.path.join(dest, "part"),
                compression_type=CompressionTypes.GZIP,
                num_shards=8,
                file_name_suffix=".tfrecord.gz",
            )
        )
    return {"work_s": time.perf_counter() - t0}


def _gzip_size(path: str) -> int:
    import gzip

    with open(path, "rb") as f:
        return len(gzip.compress(f.read(), compresslevel=6, mtime=0))


def worker_floor(items, dest) -> dict:
    import multiprocessing

    t0 = time.perf_counter()
    processes = os.cpu_count() or 1
    with multiprocessing.Pool(processes) as pool:
        compressed = sum(pool.imap_unordered(_gzip_size, [path for path, _ in items], chunksize=16))
    return {"work_s": time.perf_counter() - t0, "compressed_bytes": compressed, "processes": processes}


def worker_count(dest) -> dict:
    """Counts the records of a variant's output folder (untimed verification)."""
    import tensorflow as tf

    manifest_path = os.path.join(dest, "manifest.json")
    result: dict = {}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        splits = manifest.get("splits", {})
        files = [os.path.join(dest, shard) for split in splits.values() for shard in split.get("shards", [])]
        result["manifest_records"] = sum(int(split.get("records", 0)) for split in splits.values())
        result["manifest_counts"] = manifest.get("counts")
    else:
        files = sorted(
            os.path.join(root, name) for root, _, names in os.walk(dest) for name in names if ".tfrecord" in name
        )
    records = 0
    keys: list[str] = []
    for path in files:
        for raw in tf.data.TFRecordDataset(path, compression_type="GZIP").as_numpy_iterator():
            if not keys:
                keys = sorted(tf.train.Example.FromString(raw).features.feature)
            records += 1
    result.update(records=records, files=len(files), bytes=sum(os.path.getsize(p) for p in files), keys=keys)
    return result


def run_worker(args) -> int:
    if args.worker == "count":
        result = worker_count(args.dest)
    else:
        items = list_corpus(args.corpus)
        fn = {"serial_tf": worker_serial_tf, "plain_beam": worker_plain_beam, "floor": worker_floor}[args.worker]
        result = fn(items, args.dest)
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------
# Process-tree RSS sampling
# ----------------------------------------------------------------------------------------------


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

    The tree is walked through /proc/<pid>/task/*/children; every ~1 s (and whenever the children
    files are unavailable) /proc is also scanned for members of the root's session, so descendants
    re-parented to init are still counted (the root is started with its own session)."""

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
        full_scan = self.samples % 20 == 0
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


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _tail(path: str, limit: int = 3000) -> str:
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


def run_measured(cmd: list[str], log_dir: str, timeout: float) -> dict:
    """Runs `cmd` in its own session, timing it and sampling its process tree's RSS."""
    stdout_path = os.path.join(log_dir, "stdout.txt")
    stderr_path = os.path.join(log_dir, "stderr.txt")
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=_env(), stdout=out, stderr=err, start_new_session=True)
        sampler = TreeRssSampler(proc.pid)
        sampler.start()
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group we started (start_new_session)
            except ProcessLookupError:
                pass
            rc = proc.wait()
        wall = time.perf_counter() - t0
        usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        sampler.stop()
    # CPU time of the process and of every descendant it waited for: robust to other load.
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    return {
        "cpu_s": cpu,
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": wall,
        "peak_rss_mb": sampler.peak_kb * 1024 / 1e6,
        "peak_processes": sampler.peak_processes,
        "rss_samples": sampler.samples,
        "result": _parse_result(stdout_path),
        "stdout_path": stdout_path,
        "stderr_path": stderr_path,
    }


def variant_command(variant: str, corpus: str, dest: str, pipeline_args: list[str]) -> list[str]:
    if variant in PIPELINE_VARIANTS:
        return [sys.executable, "-m", "pipeline", "--input", corpus, "--output", dest, "--overwrite",
                *PIPELINE_VARIANTS[variant], *pipeline_args]
    return [sys.executable, os.path.abspath(__file__), "--worker", variant, "--corpus", corpus, "--dest", dest]


def verify_output(variant: str, dest: str, log_dir: str, timeout: float) -> dict:
    if variant == "floor":
        return {}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "count", "--dest", dest]
    vdir = os.path.join(log_dir, "verify")
    os.makedirs(vdir, exist_ok=True)
    measured = run_measured(cmd, vdir, timeout)
    if measured["rc"] != 0 or measured["result"] is None:
        return {"verify_error": _tail(measured["stderr_path"], 1500)}
    return measured["result"]


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(variant: str, runs: list[dict], corpus: dict) -> dict:
    ok = [r for r in runs if r["rc"] == 0 and not r["timed_out"]]
    summary = {"ok_runs": len(ok), "runs": runs}
    if not ok:
        summary["status"] = "failed"
        return summary
    summary["status"] = "ok" if len(ok) == len(runs) else "partial"
    summary["median"] = {
        "wall_s": _median([r["wall_s"] for r in ok]),
        "cpu_s": _median([r["cpu_s"] for r in ok]),
        "images_per_s": _median([r["images_per_s"] for r in ok]),
        "mb_per_s": _median([r["mb_per_s"] for r in ok]),
        "peak_rss_mb": _median([r["peak_rss_mb"] for r in ok]),
        "work_images_per_s": _median([r.get("work_images_per_s") for r in ok]),
    }
    summary["min_images_per_s"] = min(r["images_per_s"] for r in ok)
    summary["max_images_per_s"] = max(r["images_per_s"] for r in ok)
    return summary


def _fmt(value, spec: str, suffix: str = "", missing: str = "-") -> str:
    return missing if value is None else format(value, spec) + suffix


def print_table(results: dict, corpus: dict, runs: int) -> None:
    base_tp = results.get("serial_tf", {}).get("median", {}).get("images_per_s")
    base_rss = results.get("plain_beam", {}).get("median", {}).get("peak_rss_mb")
    header = (
        f"{'variant':<17} {'ok':>5} {'img/s':>8} {'(min-max)':>13} {'MB/s':>7} {'peak RSS MB':>12} "
        f"{'vs serial_tf':>13} {'RSS vs beam':>12} {'wall s':>7} {'cpu s':>7} {'img/s work':>11} {'records':>8}"
    )
    print()
    print(
        f"corpus: {corpus['path']}: {corpus['files']} files, {corpus['mb']:.1f} MB, median {corpus['median_kb']:.1f} kB, "
        f"{corpus['classes']} classes; medians of {runs} run(s) per variant; cpus={os.cpu_count()}"
    )
    print(header)
    print("-" * len(header))
    for variant, summary in results.items():
        med = summary.get("median")
        if not med:
            print(f"{variant:<17} {summary['ok_runs']:>2}/{len(summary['runs']):<2} FAILED (see below)")
            continue
        tp_ratio = med["images_per_s"] / base_tp if base_tp else None
        rss_ratio = med["peak_rss_mb"] / base_rss if base_rss else None
        records = summary.get("verify", {}).get("records")
        spread = f"({summary['min_images_per_s']:.0f}-{summary['max_images_per_s']:.0f})"
        print(
            f"{variant:<17} {summary['ok_runs']:>2}/{len(summary['runs']):<2} {med['images_per_s']:>8.1f} {spread:>13} "
            f"{med['mb_per_s']:>7.1f} {med['peak_rss_mb']:>12.0f} {_fmt(tp_ratio, '.2f', 'x'):>13} "
            f"{_fmt(rss_ratio, '.2f', 'x'):>12} {med['wall_s']:>7.2f} {med['cpu_s']:>7.2f} {_fmt(med['work_images_per_s'], '.1f'):>11} "
            f"{_fmt(records, 'd'):>8}"
        )
    print(
        "\nimg/s, MB/s: corpus files / input bytes over the subprocess' wall-clock time, start-up included;"
        "\ncpu s: user+system CPU seconds of the process tree (insensitive to other load on the machine);"
        "\npeak RSS: summed VmRSS of the process tree, sampled every ~50 ms; img/s work: after imports"
        "\n(pipeline variants: the summary's elapsed); records: TFRecord records counted in the first run's output."
    )
    work = [f"{variant} {summary['ratios']['work_throughput_vs_serial_tf']:.2f}x"
            for variant, summary in results.items()
            if variant in PIPELINE_VARIANTS and summary.get("ratios", {}).get("work_throughput_vs_serial_tf")]
    if work:
        print(f"after start-up (img/s work) vs serial_tf: {', '.join(work)}")
    for variant, summary in results.items():
        for problem in summary.get("problems", []):
            print(f"\n[{variant}] {problem}")


def build_corpus_if_missing(corpus: str) -> None:
    if os.path.isdir(corpus) and list_corpus(corpus):
        return
    if os.path.abspath(corpus) != os.path.abspath(DEFAULT_CORPUS):
        sys.exit(f"corpus {corpus} is missing or has no images (only the default corpus is built automatically)")
    print(f"building the photo corpus in {corpus} (scripts/make_photo_corpus.py) ...", flush=True)
    script = os.path.join(REPO_ROOT, "scripts", "make_photo_corpus.py")
    subprocess.run([sys.executable, script, "--out", corpus], check=True, cwd=REPO_ROOT)


def measure_per_image_costs(items: list[tuple[str, str]], runs: int) -> dict:
    """Two per-image costs inside the pipeline, each against its cheaper or former alternative,
    median over `runs` passes, bytes in memory, one thread:

    * the integrity check (transforms.image_check.check_image: header dimensions, then a 1/8-scale
      draft decode for JPEG that still reads all the data) against reading the dimensions from the
      header alone;
    * GZIP of the payload as Beam's CompressedFile deflates it: through ISA-L, as the pipeline does
      (transforms.gzip_codec), against the stdlib zlib Beam uses by default."""
    sys.path.insert(0, REPO_ROOT)
    from isal import isal_zlib  # pylint: disable=import-outside-toplevel
    from PIL import Image  # pylint: disable=import-outside-toplevel

    from transforms.image_check import check_image  # pylint: disable=import-outside-toplevel

    blobs = []
    for path, _ in items:
        with open(path, "rb") as f:
            blobs.append(f.read())

    def per_image_us(fn) -> float:
        timings = []
        for _ in range(runs):
            started = time.perf_counter()
            for blob in blobs:
                fn(blob)
            timings.append(1e6 * (time.perf_counter() - started) / len(blobs))
        return statistics.median(timings)

    def gzip_with(codec):
        def compress(blob):
            compressor = codec.compressobj(codec.Z_DEFAULT_COMPRESSION, codec.DEFLATED, codec.MAX_WBITS | 16)
            return compressor.compress(blob) + compressor.flush()
        return compress

    return {
        "header_only_us": per_image_us(lambda b: Image.open(io.BytesIO(b)).size),
        "check_image_us": per_image_us(lambda b: check_image(b, 89_478_485)),
        "gzip_zlib_us": per_image_us(gzip_with(zlib)),
        "gzip_isal_us": per_image_us(gzip_with(isal_zlib)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="folder of <class>/<image> (default: bench/photos)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {','.join(VARIANTS)}")
    parser.add_argument("--runs", type=int, default=3, help="runs per variant (default: 3)")
    parser.add_argument("--pipeline_args", default="", help='extra CLI words for the pipeline variant, e.g. --pipeline_args="--x 1"')
    parser.add_argument("--json", default=None, help="also write all figures as JSON to this path")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per run (default: 600)")
    parser.add_argument("--tmp", default=None, help="where run outputs are written (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the run output folders")
    parser.add_argument("--no-verify", dest="verify", action="store_false", help="do not count the output records")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip the page-cache warm-up")
    # Internal: the timed subprocesses.
    parser.add_argument("--worker", choices=("serial_tf", "plain_beam", "floor", "count"), help=argparse.SUPPRESS)
    parser.add_argument("--dest", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        return run_worker(args)

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"unknown variant(s) {unknown}; choose from {','.join(VARIANTS)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    pipeline_args = shlex.split(args.pipeline_args)

    corpus_path = os.path.abspath(args.corpus)
    build_corpus_if_missing(corpus_path)
    items = list_corpus(corpus_path)
    corpus = {"path": corpus_path, **corpus_stats(items)}
    print(
        f"corpus {corpus_path}: {corpus['files']} files, {corpus['mb']:.1f} MB; variants {variants}, "
        f"{args.runs} run(s) each",
        flush=True,
    )

    if args.warmup:
        warm_page_cache(items)
        subprocess.run(
            [sys.executable, "-c", "import tensorflow, apache_beam"],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    load_start = os.getloadavg()
    work_root = tempfile.mkdtemp(prefix="benchmark-", dir=args.tmp)
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    problems: dict[str, list[str]] = {v: [] for v in variants}
    verified: dict[str, dict] = {}
    failed: set[str] = set()
    try:
        for run_index in range(args.runs):
            for variant in variants:
                if variant in failed:
                    continue
                run_dir = os.path.join(work_root, f"{variant}-{run_index}")
                dest = os.path.join(run_dir, "out")
                os.makedirs(run_dir)
                if variant not in PIPELINE_VARIANTS:
                    os.makedirs(dest)  # the pipeline creates its own output folder
                measured = run_measured(
                    variant_command(variant, corpus_path, dest, pipeline_args), run_dir, args.timeout
                )
                record = {
                    "run": run_index,
                    "rc": measured["rc"],
                    "timed_out": measured["timed_out"],
                    "wall_s": measured["wall_s"],
                    "cpu_s": measured["cpu_s"],
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
                ok = measured["rc"] == 0 and not measured["timed_out"]
                status = "ok" if ok else ("TIMED OUT" if measured["timed_out"] else f"FAILED rc={measured['rc']}")
                print(
                    f"  run {run_index + 1}/{args.runs} {variant:<17} {status:<10} {record['wall_s']:7.2f} s  "
                    f"{record['images_per_s']:7.1f} img/s  cpu {record['cpu_s']:6.1f} s  peak RSS {record['peak_rss_mb']:6.0f} MB"
                    f"  (load {record['loadavg_after']:.1f})",
                    flush=True,
                )
                if not ok:
                    failed.add(variant)
                    problems[variant].append(
                        f"run {run_index + 1} {status}; command: {shlex.join(variant_command(variant, corpus_path, dest, pipeline_args))}\n"
                        f"stderr (tail):\n{_tail(measured['stderr_path'])}"
                    )
                elif args.verify and variant not in verified:
                    verified[variant] = verify_output(variant, dest, run_dir, args.timeout)
                    check = verified[variant]
                    if "verify_error" in check:
                        problems[variant].append(f"verification failed:\n{check['verify_error']}")
                    elif variant != "floor" and check.get("records") != corpus["files"]:
                        problems[variant].append(
                            f"wrote {check.get('records')} records for {corpus['files']} input files: {check}"
                        )
                runs[variant].append(record)
                if not args.keep:
                    shutil.rmtree(dest, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work_root, ignore_errors=True)

    results = {}
    for variant in variants:
        summary = summarize(variant, runs[variant], corpus)
        summary["verify"] = verified.get(variant, {})
        summary["problems"] = problems[variant]
        results[variant] = summary

    base_tp = results.get("serial_tf", {}).get("median", {}).get("images_per_s")
    base_rss = results.get("plain_beam", {}).get("median", {}).get("peak_rss_mb")
    for summary in results.values():
        med = summary.get("median")
        if med:
            base_work = results.get("serial_tf", {}).get("median", {}).get("work_images_per_s")
            summary["ratios"] = {
                "throughput_vs_serial_tf": med["images_per_s"] / base_tp if base_tp else None,
                "work_throughput_vs_serial_tf": (med["work_images_per_s"] / base_work
                                                 if base_work and med["work_images_per_s"] else None),
                "peak_rss_vs_plain_beam": med["peak_rss_mb"] / base_rss if base_rss else None,
            }

    print_table(results, corpus, args.runs)
    costs = measure_per_image_costs(items, args.runs)
    pipeline_rate = results.get("pipeline", {}).get("median", {}).get("images_per_s")
    share = (f", {100 * costs['check_image_us'] / (1e6 / pipeline_rate):.0f}% of the pipeline's time per image"
             if pipeline_rate else "")
    print(f"\nper image (median of {args.runs}, one thread): integrity check: header-only dimensions "
          f"{costs['header_only_us']:.0f} us, check_image {costs['check_image_us']:.0f} us{share}; "
          f"GZIP: stdlib zlib {costs['gzip_zlib_us']:.0f} us, ISA-L (the pipeline's) {costs['gzip_isal_us']:.0f} us")
    load_end = os.getloadavg()
    if load_start[0] > 0.5 * (os.cpu_count() or 1):
        print(f"\nnote: the machine was busy when the benchmark started (load average {load_start[0]:.2f}).")

    if args.json:
        report = {
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "corpus": corpus,
            "runs_per_variant": args.runs,
            "pipeline_args": pipeline_args,
            "machine": {
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "loadavg_start": load_start,
                "loadavg_end": load_end,
            },
            "variants": results,
            "per_image_costs": costs,
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, sort_keys=True)
        print(f"\nwrote {args.json}")
    return 0 if all(r["status"] == "ok" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
