"""Which Beam runner a job gets, and the pipeline object built on it.

Without --runner the job runs in this process, on one of two local runners (their throughput
and peak memory: README, Performance):

* lean (the default): Beam's BundleBasedDirectRunner. Bundles run on one thread, but ReadImages
  converts images in a converting process per usable core from 3 cores on
  (`image.local_processes`, image_processes below), on its own threads below that (where they
  keep the cores as busy, with less CPU: README, Performance). It holds a
  step's whole output until the step's bundle ends, so image records go into their shards in the
  step that makes them (writes_while_reading), and CSV rows wait for their schema on disk
  (transforms.tabular_spill).
* parallel (`--direct_num_workers N`, N > 1, or 0 for one per core): the FnApiRunner with N
  in-process workers (direct_running_mode in_memory, GroupByKey values paged through its state
  API). Its workers are threads under one GIL, and it holds every record, more per input byte.

The log warns, pointing at Dataflow, when the estimated peak exceeds the memory available now.

With --runner PortableRunner the job runs wherever its job service puts it. Where its SDK workers
run on this machine (portable_workers_here: LOOPBACK, or a worker pool on loopback), a local path
is the user's file, as on the local runners, and the launcher watches the job's worker, which
Beam's local job service would wait for forever once it died (pipeline.portable_workers).

Beam 2.77's data-plane race: TimeBasedBufferingClosableOutputStream
(apache_beam/runners/worker/data_plane.py) runs a thread that, every N ms, calls get(), the send
callback, then _clear(), while the thread writing elements keeps writing to the same buffer
without the flush lock: what it writes in between is dropped, silently. Only streams with a time
limit above 0 have that thread:

* FnApiRunner in direct_running_mode multi_threading: its in-process gRPC workers always get
  1,000 ms (worker_handlers.py: `config.get('data_buffer_time_limit_ms') or
  DATA_BUFFER_TIME_LIMIT_MS`, so an explicit 0 becomes 1,000 too), and so does the runner's gRPC
  data server, which sends bundle input to the workers in multi_processing mode as well.
* in_memory mode passes data in memory (InMemoryDataChannel, limit 0) and the
  BundleBasedDirectRunner has no data plane: neither has the thread. Hence an explicit --runner
  DirectRunner/FnApiRunner gets direct_running_mode=in_memory unless told otherwise (DirectRunner
  runs as the FnApiRunner: Beam's would first fetch Prism from GitHub and run the job there).
* Dataflow's Python SDK harness (and any portable runner's) reads the limit from the experiment
  `data_buffer_time_limit_ms=N`, default 0 (sdk_worker_main._get_data_buffer_time_limit_ms).
  pipeline_options refuses N > 0 on every runner (UnsafeOptionError), before anything runs.

Whatever the runner, the job reads its shards back and rejects any run whose shards hold fewer
records than it produced.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import difflib
import functools
import ipaddress
import logging
import os
import signal
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import NoReturn

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DebugOptions,
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    StandardOptions,
    TypeOptions,
)
from apache_beam.runners.direct.direct_runner import DirectPipelineResult
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.utils import thread_pool_executor

from core.contract import json_text
from core.contract.manifest import IMAGE_KINDS
from core.storage import is_remote
from pipeline.portable_workers import WatchedPortableRunner
from transforms import stopping
from transforms.convert_pool import usable_cores
from transforms.gzip_choice import SAMPLE_BYTES
from transforms.tabular_spill import bucket_memory

_LOG = logging.getLogger("pipeline")

PARALLEL, LEAN = "FnApiRunner", "BundleBasedDirectRunner"
AUTO = "auto"  # image.local_processes: sized from the cores
AUTO_PROCESSES_FROM_CORES = 3
_GB = 1e9
# Peak RSS = base + per_byte * held bytes (lean_held_bytes on the lean runner, the input's on the
# parallel one), fitted to the runs of scripts/benchmark.py and scripts/bench_tabular_memory.py.
_PEAK_MODEL = {PARALLEL: (0.25 * _GB, 2.5), LEAN: (0.12 * _GB, 1.05)}


def estimated_peak(runner: str, held_bytes: int) -> float:
    """The peak RSS, in bytes, of a local run on `runner` that holds `held_bytes` (_PEAK_MODEL)."""
    base, per_byte = _PEAK_MODEL[runner]
    return base + per_byte * held_bytes


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes; None where there is none (not Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def runner_of(beam_args: list[str]) -> str:
    """The runner a job of these flags runs on: the one --runner names; without it LEAN, or
    PARALLEL where --direct_num_workers asks for several workers (0: one per core)."""
    options = PipelineOptions(beam_args)
    return options.view_as(StandardOptions).runner or _local_runner(_workers_asked(beam_args, options))


def _workers_asked(beam_args: list[str], options: PipelineOptions) -> int | None:
    """The --direct_num_workers given, None if none was."""
    return options.view_as(DirectOptions).direct_num_workers if _given(beam_args, "--direct_num_workers") else None


def _local_runner(workers_asked: int | None) -> str:
    return LEAN if workers_asked in (None, 1) else PARALLEL


def _log_local_runner(workers_asked: int | None, held_bytes: int, lean_held_bytes: int | None) -> str:
    """The local runner (_local_runner), logged with its estimated peak memory, and a warning when
    that exceeds what is available."""
    runner = _local_runner(workers_asked)
    held = lean_held_bytes if runner == LEAN and lean_held_bytes is not None else held_bytes
    peak, available = estimated_peak(runner, held), available_memory()
    if available is not None and peak > available:
        _LOG.warning(
            "this local run holds its records in memory: this input needs about %.1f GB, %.1f GB is available; "
            "run it on Dataflow (README, Running on Google Cloud)",
            peak / _GB,
            available / _GB,
        )
    if runner == LEAN:
        _LOG.info("local run (BundleBasedDirectRunner; estimated peak %.2f GB)", peak / _GB)
    else:
        _LOG.info(
            "local run on %s in-process workers (FnApiRunner; estimated peak %.2f GB)",
            workers_asked or os.cpu_count(),
            peak / _GB,
        )
    return runner


def runs_here(beam_args: list[str]) -> bool:
    """Whether the job runs on a local runner (no --runner given), in this process: the parallel
    runner's worker processes (direct_running_mode multi_processing) are the exception, which
    whatever relies on this must allow for."""
    return not _given(beam_args, "--runner")


def _given(beam_args: list[str], flag: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in beam_args)


BUFFER_TIME_LIMIT = "data_buffer_time_limit_ms"  # the experiment that turns the racy flush thread on


class UnsafeOptionError(ValueError):
    """A Beam option under which the job would lose records, or would not do what the option asks;
    raised before anything runs."""


def check_experiments(experiments: Iterable[str]) -> None:
    """Raises UnsafeOptionError when the experiments set data_buffer_time_limit_ms to anything but
    an integer <= 0. Each item may hold several, comma-separated (as --experiments=a,b and gcloud's
    --additional-experiments do)."""
    for item in experiments:
        for experiment in str(item).split(","):
            name, sep, value = experiment.strip().partition("=")
            if name.strip() != BUFFER_TIME_LIMIT or not sep:
                continue
            try:
                off = int(value) <= 0
            except ValueError:
                off = False
            if not off:
                raise UnsafeOptionError(
                    f"refusing the Beam experiment {experiment.strip()}: above 0 it starts Beam 2.77's timed flush "
                    "thread (TimeBasedBufferingClosableOutputStream, apache_beam/runners/worker/data_plane.py), "
                    "which clears the output buffer while the bundle thread is still writing to it, so records are "
                    f"dropped silently; drop the experiment (only {BUFFER_TIME_LIMIT}=0 is allowed)"
                )


BUNDLE_REPEAT = "--direct_runner_bundle_repeat"


def check_bundle_repeat(runner: str, options: PipelineOptions) -> None:
    """Raises UnsafeOptionError when BUNDLE_REPEAT asks the lean runner to repeat bundles: only the
    FnApiRunner repeats them (apache_beam/runners/portability/fn_api_runner/fn_runner.py), and the
    BundleBasedDirectRunner would run each bundle once, so a run meant to show that the job
    survives retried bundles would show nothing."""
    repeat = options.view_as(DirectOptions).direct_runner_bundle_repeat
    if runner == LEAN and repeat:
        raise UnsafeOptionError(
            f"refusing {BUNDLE_REPEAT} {repeat} on the lean local runner ({LEAN}), which runs every bundle "
            "once whatever it says: add --direct_num_workers 2 (or --runner FnApiRunner) to repeat bundles on the "
            "FnApiRunner"
        )


def check_runner_name(runner: str | None) -> None:
    """Raises UnsafeOptionError when --runner names no runner Beam knows (a typo: DataflowRuner),
    with the closest names: Beam says so only once the input is planned and the job built, as a
    failure of the run (exit 3). A dotted name is a runner class of the user's: Beam imports it."""
    if not runner or "." in runner:
        return
    known = StandardOptions.KNOWN_RUNNER_NAMES
    if runner.lower() in {name.lower() for name in known} | {name.lower().removesuffix("runner") for name in known}:
        return
    close = difflib.get_close_matches(runner, known, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise UnsafeOptionError(
        f"--runner {runner} is no runner Beam knows: {hint}(known: {', '.join(known)}, or the full name of a "
        "PipelineRunner class)"
    )


def refuse_unsafe_options(beam_args: list[str]) -> None:
    """UnsafeOptionError when the Beam flags would make the job lose records (check_experiments),
    name no runner (check_runner_name) or ask the runner for what it does not do
    (check_bundle_repeat); commands call it before they touch any data."""
    options = PipelineOptions(beam_args)
    check_experiments(options.view_as(DebugOptions).experiments or [])
    check_runner_name(options.view_as(StandardOptions).runner)
    check_bundle_repeat(runner_of(beam_args), options)


class _Captured(Exception):
    pass


def beam_parser() -> argparse.ArgumentParser:
    """The argument parser Beam builds from every PipelineOptions class it knows (taken from
    get_all_options through its add_extra_args_fn hook, before it parses anything)."""
    captured = []

    def capture(parser):
        captured.append(parser)
        raise _Captured

    try:
        PipelineOptions([]).get_all_options(add_extra_args_fn=capture)
    except _Captured:
        pass
    return captured[0]


def unknown_beam_args(beam_args: list[str], error: Callable[[str], NoReturn]) -> list[str]:
    """The arguments no Beam option defines (Beam itself only warns about them and goes on). A
    Beam option that does not parse goes to `error` (the command's parser's), not to Beam's
    parser, which would print its usage block first."""
    parser = beam_parser()
    parser.error = error
    _, unknown = parser.parse_known_args(beam_args)
    return unknown


def beam_flag_names() -> list[str]:
    return [name for action in beam_parser()._actions for name in action.option_strings if name.startswith("--")]


def pipeline_options(beam_args: list[str], held_bytes: int = 0, lean_held_bytes: int | None = None) -> PipelineOptions:
    """Beam options from the flags we do not parse; `held_bytes` (parallel_held_bytes of the
    planned listing) sizes the memory warning of a local run (no --runner given), or
    `lean_held_bytes` on the lean runner when given (lean_held_bytes). UnsafeOptionError for
    options that would make the job lose records (check_experiments) or that the runner does not
    honour (check_bundle_repeat)."""
    options = PipelineOptions(beam_args)
    check_experiments(options.view_as(DebugOptions).experiments or [])
    check_bundle_repeat(runner_of(beam_args), options)
    standard = options.view_as(StandardOptions)
    direct = options.view_as(DirectOptions)
    if standard.runner is None:
        standard.runner = _log_local_runner(_workers_asked(beam_args, options), held_bytes, lean_held_bytes)
    if standard.runner == "DirectRunner":
        # Beam 2.77's DirectRunner first fetches Prism's binary from GitHub and runs the job there;
        # offline it falls back to the FnApiRunner. It gets the FnApiRunner, online or not.
        _LOG.info("--runner DirectRunner: the job runs on the FnApiRunner (Prism is not fetched)")
        standard.runner = PARALLEL
    if standard.runner == LEAN:
        # Beam's type checks while the graph is built (and the element types they infer, of which
        # the lean runner only uses its grouping keys' coder: ours are ints and None) delay a
        # local run's first record (README, Performance); the same graph is type-checked on every
        # other runner, and in the tests of each transform.
        options.view_as(TypeOptions).pipeline_type_check = False
    if standard.runner == PARALLEL and not _given(beam_args, "--direct_running_mode"):
        direct.direct_running_mode = "in_memory"
    if standard.runner == PARALLEL and direct.direct_running_mode == "multi_threading":
        _LOG.warning(
            "direct_running_mode=multi_threading: Beam 2.77's data plane drops records in this mode; "
            "a run whose shards lose records is rejected (exit 1): in_memory is the safe mode"
        )
    return options


def image_processes(runner: str, setting: int | str) -> int:
    """How many processes convert images (transforms.convert_pool) for ReadImages: on the lean
    local runner `setting`, where "auto" is one per usable core from AUTO_PROCESSES_FROM_CORES
    cores on (below that, ReadImages' threads: README, Performance); 0 (conversion on the threads)
    on every other runner: Dataflow runs an SDK process per core already, and the parallel runner
    a ReadImages per worker thread."""
    if runner != LEAN:
        return 0
    if setting == AUTO:
        cores = usable_cores()
        return cores if cores >= AUTO_PROCESSES_FROM_CORES else 0
    return int(setting)


def shard_check_processes(options: PipelineOptions, folder: str) -> int:
    """How many processes read a run's shards back at once (pipeline.shard_check): one per usable
    core on the lean local runner when the shards are local and there are cores to share; 0 (on
    the runner's own thread) otherwise: other runners spread the shards over their workers, and
    gs:// shards are read through Beam's GCS client."""
    if options.view_as(StandardOptions).runner != LEAN or is_remote(folder):
        return 0
    cores = usable_cores()
    return cores if cores >= 2 else 0


# A plan with more shards keeps WriteSplits on the lean runner too: writing while reading keeps
# a file open per shard, in each converting process too (gs:// ones hold up to 16 MiB each).
MAX_OPEN_SHARDS = 512


def lean_writes_while_reading(kind: str, shards: dict[str, int], setting: bool) -> bool:
    """Whether the lean runner writes this run's records into their shards as they are made
    (transforms.shard_parts), when the plan's `shards` are at most MAX_OPEN_SHARDS: image records
    as ReadImages makes them, when `setting` (`image.local_write_while_reading`) says so; tabular
    ones as each bucket of rows spilled to disk is encoded (transforms.tabular_spill)."""
    return (kind == "csv" or (setting and kind in IMAGE_KINDS)) and sum(shards.values()) <= MAX_OPEN_SHARDS


# What each open shard holds while a lean run writes as it reads: Beam buffers a gs:// file in chunks
# of 16 MiB (apache_beam/io/gcp/gcsio.py, BeamBlobWriter) before uploading each (README, How it
# works); a local part gets each record whole as it is made (transforms.part_appender): nothing.
OPEN_SHARD_BYTES = {"gs": 16 * 2**20, "local": 0}


# What a GZIP shard written through Beam's codec holds while open: the sample its deflate is chosen
# on (transforms.gzip_choice), then ISA-L's deflate state, about 0.4 MiB. Tabular records go through
# it; image records are appended to local parts (transforms.part_appender) without it.
COMPRESSING_SHARD_BYTES = SAMPLE_BYTES + 4 * 2**20 // 10
# What a runner holding every tabular row holds per input byte, in units of its _PEAK_MODEL's
# per-byte cost: the lean runner's graph for more than MAX_OPEN_SHARDS shards (every row as Python
# objects), the parallel runner (its GroupByKeys). Fitted to scripts/bench_tabular_memory.py's
# runs of both runners (`--runners lean,parallel`, and a checkout that holds every row).
HELD_ROW_BYTES_PER_INPUT_BYTE = {LEAN: 30, PARALLEL: 10}


def parallel_held_bytes(kind: str, input_bytes: int) -> int:
    """What the parallel runner holds at its peak besides its base: every record."""
    return input_bytes * (HELD_ROW_BYTES_PER_INPUT_BYTE[PARALLEL] if kind == "csv" else 1)


def lean_held_bytes(kind: str, shards: dict[str, int], setting: bool, output: str, input_bytes: int) -> int:
    """What the lean runner holds at its peak besides its base, for an input of `input_bytes`: every
    record, or where it writes while reading, a buffer per open shard, and for tabular input one
    bucket of the rows spilled to disk (transforms.tabular_spill) and a compressing stream per shard."""
    if not lean_writes_while_reading(kind, shards, setting):
        return input_bytes * (HELD_ROW_BYTES_PER_INPUT_BYTE[LEAN] if kind == "csv" else 1)
    open_shards = sum(shards.values())
    held = open_shards * OPEN_SHARD_BYTES["gs" if is_remote(output) else "local"]
    if kind == "csv":
        held += bucket_memory(input_bytes) + open_shards * COMPRESSING_SHARD_BYTES
    return held


def writes_while_reading(options: PipelineOptions, kind: str, shards: dict[str, int], setting: bool) -> bool:
    """lean_writes_while_reading, on the lean runner only. Every other runner groups by shard (WriteSplits):
    Dataflow passes records between fused steps without holding them, and the parallel runner's
    GroupByKeys hold them anyway."""
    return options.view_as(StandardOptions).runner == LEAN and lean_writes_while_reading(kind, shards, setting)


def reads_local_files(options: PipelineOptions) -> bool:
    """Whether a local path names the user's file on the runner `options` name: on the local
    runners, and on a portable runner whose SDK workers run on this machine
    (portable_workers_here). Every other runner's workers (Dataflow's, a portable runner's in
    Docker containers or on other machines) have disks of their own."""
    runner = options.view_as(StandardOptions).runner
    return runner in (None, LEAN, PARALLEL, "DirectRunner") or portable_workers_here(options)


PORTABLE = "PortableRunner"
OPTION_CHARS = 1 << 16  # what a JSON option (--environment_config) may hold: a worker pool's address
IN_PROCESS_JOB_SERVICE = "embed"  # --job_endpoint embed: Beam runs the job service in the launcher


def portable_workers_here(options: PipelineOptions) -> bool:
    """Whether a PortableRunner job's SDK workers run on this machine: LOOPBACK (they run in the
    launcher's process), or EXTERNAL with both the job service (--job_endpoint) and the worker pool
    (--environment_config: host:port, or JSON with a "url") on a loopback address; the job service
    asks the pool for workers at that address from its own machine. Flink's and Spark's runners are
    not tested here (their job servers are jars this project does not fetch): they do not count."""
    if str(options.view_as(StandardOptions).runner).rsplit(".", 1)[-1] != PORTABLE:
        return False
    portable = options.view_as(PortableOptions)
    environment = (portable.environment_type or "").upper()
    if environment == "LOOPBACK":
        return True
    if environment != "EXTERNAL":
        return False
    config = portable.environment_config or portable.lookup_environment_option("external_service_address") or ""
    if config.strip().startswith("{"):
        config = _url(config)
    endpoint = portable.job_endpoint or ""
    return (endpoint == IN_PROCESS_JOB_SERVICE or _on_loopback(endpoint)) and _on_loopback(config)


def _url(config: str) -> str:
    """The "url" of a worker pool's JSON --environment_config; "" when it names none (Beam
    refuses a config it cannot read when it starts the job)."""
    try:
        value = json_text.loads(config, OPTION_CHARS)
    except json_text.NotJson:
        return ""
    url = value.get("url") if isinstance(value, dict) else None
    return url if isinstance(url, str) else ""


def _on_loopback(address: str) -> bool:
    """Whether a gRPC `host:port` names this machine by a loopback name or address."""
    host = urllib.parse.urlsplit("//" + address.strip()).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def spreads_work(options: PipelineOptions) -> bool:
    """Whether a Reshuffle spreads work over this runner's workers. The lean runner runs one bundle
    at a time on one thread, so there a Reshuffle only adds its steps (six transforms that Beam
    inspects and the runner schedules: README, Performance)."""
    return options.view_as(StandardOptions).runner != LEAN


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A pipeline on the runner `options` names. The FnApiRunner gets use_state_iterables: each
    GroupByKey's values then reach its workers in pages through the state API, instead of whole
    inside the bundle's data, where the runner holds three to four copies of them at once; but not
    when it repeats bundles (--direct_runner_bundle_repeat): Beam 2.77 then gives the bundle that
    counts a GroupByKey's values as the repeats left them, the first page only (measured: 2 of
    1,000 values per key), so the run would be rejected. A portable job whose SDK workers a pool
    on this machine starts gets its worker watched (pipeline.portable_workers)."""
    runner = options.view_as(StandardOptions).runner
    if runner == PARALLEL:
        paged = not options.view_as(DirectOptions).direct_runner_bundle_repeat
        return beam.Pipeline(runner=FnApiRunner(use_state_iterables=paged), options=options)
    if portable_workers_here(options) and options.view_as(PortableOptions).environment_type.upper() == "EXTERNAL":
        return beam.Pipeline(runner=WatchedPortableRunner(), options=options)
    return beam.Pipeline(options=options)


def runner_api_round_trip(options: PipelineOptions) -> bool | str:
    """What `Pipeline.run(test_runner_api=...)` gets. By default Beam rebuilds the job's graph from
    its portable (runner API) form before running it on a runner that does not take that form, as
    a test of it. The lean runner takes the Python graph itself and runs nothing remote, so the
    round trip only delays its first record; every other runner keeps Beam's default."""
    return False if options.view_as(StandardOptions).runner == LEAN else "AUTO"


def dataflow_job_url(project: str, region: str, job_id: str) -> str:
    """The Cloud console page of a Dataflow job (the address Beam itself logs at INFO)."""
    quote = functools.partial(urllib.parse.quote, safe="")
    return f"https://console.cloud.google.com/dataflow/jobs/{quote(region)}/{quote(job_id)}?project={quote(project)}"


def submitted_job_line(result, options: PipelineOptions) -> str | None:
    """What a Dataflow user needs the moment the job is created: its id, its console page and how
    to cancel it (Beam's own "Created job with id" lines are INFO on the apache_beam logger, which
    pipeline.cli keeps at WARNING). None for local runners and for a job only built or staged
    (--dry_run, templates), which has no id. `result`: what Pipeline.run() returned."""
    if "Dataflow" not in str(options.view_as(StandardOptions).runner) or not getattr(result, "has_job", False):
        return None
    job_id, cloud = result.job_id(), options.view_as(GoogleCloudOptions)
    return (
        f"Dataflow job {job_id} submitted: {dataflow_job_url(cloud.project, cloud.region, job_id)} "
        f"(Ctrl-C stops waiting, not the job: gcloud dataflow jobs cancel {job_id} --region {cloud.region} "
        f"--project {cloud.project})"
    )


_M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
MALLOC_ARENAS = 2


def limit_malloc_arenas() -> bool:
    """Caps glibc at MALLOC_ARENAS malloc arenas, as MALLOC_ARENA_MAX=2 would (unless the user set
    that variable). glibc gives each new thread its own arena, up to 8 per core, and record
    buffers freed in one arena are not reused by another, so the parallel runner's workers and
    ReadImages' threads would hold free memory at peak. True if glibc took the setting."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        return ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, MALLOC_ARENAS) == 1
    except (OSError, AttributeError):  # not glibc
        return False


class HideInMemoryWorkersWarning(logging.Filter):
    """Beam warns that in_memory mode ignores direct_num_workers > 1. It does not: the FnApiRunner
    splits each stage's input over that many in-process workers on as many threads. Without this
    filter every parallel local run starts with a false alarm."""

    LOGGER = "apache_beam.runners.portability.fn_api_runner.fn_runner"

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("If direct_num_workers is not equal to 1")


# How long a stopped local run's threads get to stop, before and after their next Python
# instruction is made to raise Stopped (stop_local_run).
STOP_SECONDS, FORCED_STOP_SECONDS = 3.0, 2.0


@contextlib.contextmanager
def interrupts_stop_the_run():
    """Within it, Ctrl-C raises the stop flag (transforms.stopping) before it interrupts the main
    thread. The FnApiRunner runs the job inside Pipeline.run(): an interrupt there unwinds through
    Beam's clean-up, which tears down the DoFns its in-process workers are still running (each
    failing worker would log an error) before stop_local_run gets to stop them. Left alone where
    SIGINT has a handler other than Python's default, or off the main thread (no handler can be set)."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def interrupt(signum, frame):
        stopping.request_stop()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def direct_runner_threads(result) -> list[threading.Thread]:
    """The threads a BundleBasedDirectRunner run works on ([] for any other run's `result`): its
    executor's daemon workers (apache_beam/runners/direct/executor.py, _ExecutorService.workers).
    A Beam internal: no public API names them, and DirectPipelineResult.cancel() joins them with no
    time limit. tests/pipeline/test_job_stop.py fails if Beam changes it."""
    if not isinstance(result, DirectPipelineResult):
        return []
    return list(result._executor._executor.executor_service.workers)


def in_memory_workers(options: PipelineOptions) -> bool:
    """Whether the job's bundles run on the FnApiRunner's in-process workers (fn_api_worker_threads):
    the parallel runner (--runner DirectRunner included: pipeline_options) in direct_running_mode
    in_memory."""
    direct = options.view_as(DirectOptions)
    return options.view_as(StandardOptions).runner == PARALLEL and (direct.direct_running_mode == "in_memory")


def fn_api_worker_threads() -> list[threading.Thread]:
    """The threads the FnApiRunner's in-process workers (in_memory) run bundles on: its
    ParallelBundleManager (apache_beam/runners/portability/fn_api_runner/fn_runner.py) runs each
    worker's part of a bundle as a task of Beam's shared thread pool
    (apache_beam/utils/thread_pool_executor.py, shared_unbounded_instance), which nothing else in
    the launcher uses in that mode. Beam waits for none of them when the main thread, which runs
    the job inside Pipeline.run(), is interrupted. A Beam internal (the pool's _workers, and
    _running's _work_item): tests/pipeline/test_job_stop.py fails if Beam changes it."""
    return list(thread_pool_executor.shared_unbounded_instance()._workers)


def _running(thread: threading.Thread) -> bool:
    """Whether `thread` still works for the stopped run: alive, and for a thread of Beam's shared
    pool (fn_api_worker_threads), which waits for its next task forever, on a task (its
    _work_item, None while idle)."""
    if isinstance(thread, thread_pool_executor._Worker):
        return thread.is_alive() and thread._work_item is not None
    return thread.is_alive()


def local_run_threads(result, options: PipelineOptions) -> list[threading.Thread]:
    """What a local run may still be working on: the lean runner's threads, or, where the
    FnApiRunner's run() was interrupted (`result` None), its in-process workers' threads."""
    if result is None and in_memory_workers(options):
        return fn_api_worker_threads()
    return direct_runner_threads(result)


def _raise_stopped_in(thread: threading.Thread) -> None:
    """Makes `thread` raise Stopped at its next Python instruction (CPython's
    PyThreadState_SetAsyncExc): for a step of Beam's own (a GroupByKey) that checks no flag."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(stopping.Stopped))


def _withdraw_stopped_in(thread: threading.Thread) -> None:
    """Withdraws a Stopped that `thread` has not raised yet: a pool thread that went idle first
    would raise it at its next task, and a later run in this process would wait for that forever."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), None)


def stop_local_run(result, options: PipelineOptions) -> bool:
    """Stops a local run's threads before its launcher removes what the run wrote: the DoFns stop
    at their next check (transforms.stopping), the runner starts no other bundle, and a step that
    checks nothing is made to raise Stopped after STOP_SECONDS. True when every thread stopped
    (always where nothing runs here: Dataflow, a finished run). `result`: what Pipeline.run()
    returned, None when it returned nothing (the FnApiRunner's run() was interrupted: its
    scheduling, on the main thread, ended there)."""
    stopping.request_stop()
    threads = [t for t in local_run_threads(result, options) if _running(t)]
    if not threads:
        return True
    if result is not None:
        # cancel() stops the scheduling at once, then waits for the running bundle, however long.
        threading.Thread(target=result.cancel, name="cancel-run", daemon=True).start()
    if not _stopped(threads, STOP_SECONDS):
        forced = [t for t in threads if _running(t)]
        for thread in forced:
            _raise_stopped_in(thread)
        if not _stopped(forced, FORCED_STOP_SECONDS):
            _LOG.warning("the run's threads did not stop: files it writes from now on are not cleaned up")
            return False
        for thread in forced:
            _withdraw_stopped_in(thread)
    return True


def _stopped(threads: list[threading.Thread], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_running(thread) for thread in threads):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
