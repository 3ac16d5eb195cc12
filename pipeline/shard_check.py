"""One shard read back: the records it holds, or why it cannot be read, and with `index` its record
index written into the index folder beside it (core.contract.layout); pipeline.readback compares
the counts with what the job produced.

Without Beam for local shards (remote ones load core.storage when one is read), so that a
local run reads its shards back in processes of its own, all at once (`count_shards`, which
runs this module as `python -m pipeline.shard_check`), instead of one after another on the
runner's one thread.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable

import pipeline
from core import local_writes
from core.contract import json_text
from core.contract.layout import INDEX_FOLDER, TFRECORD, index_file, is_remote
from core.tfrecord_framing import FRAMING_BYTES
from pipeline.shard_records import read_shard
from pipeline.tfrecord_reader import RecordError

# What a counting process answers of a shard, a JSON line (ShardCount): its name, a count and a
# reason are far shorter.
ANSWER_CHARS = 1 << 20
# Where `pipeline` is imported from, for the processes (a checkout or site-packages).
_IMPORT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(pipeline.__file__)))


@dataclasses.dataclass(frozen=True)
class ShardCount:
    """One shard as read back: its file name, its records, and why it cannot be read ("" if it can)."""

    name: str
    records: int
    error: str = ""


def index_text(framed: list[tuple[int, int]]) -> str:
    """A record index: one `offset length` line per record (offset of its header in the file,
    length including the framing), as DALI's and the `tfrecord` package's tfrecord2idx write it."""
    return "".join(f"{offset} {length}\n" for offset, length in framed)


def count_shard(path: str, compression: str, index: bool, file_format: str = TFRECORD) -> ShardCount:
    """Reads a shard back record by record (pipeline.shard_records: a TFRecord file's framing and
    CRCs, an ArrayRecord file's chunk hashes), as a regular file inside its folder. A missing or
    broken shard is a verdict (ShardCount.error); an I/O error is raised."""
    name = path.rsplit("/", 1)[-1]
    if not _exists(path):
        return ShardCount(name, 0, "missing")
    framed = []
    try:
        for offset, data in read_shard(path, compression, file_format, inside=os.path.dirname(path) or "."):
            framed.append((offset, len(data) + FRAMING_BYTES))
    except RecordError as e:
        return ShardCount(name, len(framed), f"record {e.record}: {e.message}")
    if index:
        _write_index(path, index_text(framed))
    return ShardCount(name, len(framed))


def _exists(path: str) -> bool:
    if is_remote(path):
        from core import storage  # Beam: only for remote shards (module docstring)

        return storage.exists(path)
    return os.path.exists(path)


def _write_index(shard: str, text: str) -> None:
    """Writes the index of the shard at `shard` into the index folder beside it (made locally,
    never taken when it is a link; nor is a link under the index's own name written through)."""
    folder, name = shard.rsplit("/", 1) if "/" in shard else (".", shard)
    if is_remote(shard):
        from core import storage  # Beam: only for remote shards (module docstring)

        storage.write_bytes(f"{folder}/{index_file(name)}", text.encode(), "text/plain")
        return
    local_writes.real_folder(os.path.join(folder, INDEX_FOLDER), make=True)
    with local_writes.create_new(os.path.join(folder, index_file(name))) as f:
        f.write(text.encode())


# Below this many bytes of shards in all, starting the processes (0.07 s each) costs more than
# they save (README, Performance).
IN_PROCESSES_FROM_BYTES = 256 << 20


def count_shards(
    paths: list[str],
    compression: str,
    index: bool,
    processes: int,
    on_counted: Callable[[], object] = lambda: None,
    file_format: str = TFRECORD,
) -> list[ShardCount]:
    """count_shard of each local shard: in `processes` processes at once, each given shards of
    about equal bytes, when they hold at least IN_PROCESSES_FROM_BYTES in all, else one after
    another here; `on_counted()` as each shard is counted (from several threads at once). Raises
    what a process failed with (an I/O error: the run fails, as it would here)."""
    sizes = {path: _size(path) for path in paths}
    if sum(sizes.values()) < IN_PROCESSES_FROM_BYTES:
        counted = []
        for path in paths:
            counted.append(count_shard(path, compression, index, file_format))
            on_counted()
        return counted
    shares = [[] for _ in range(min(processes, len(paths)))]
    loads = [0] * len(shares)
    for path in sorted(paths, key=sizes.get, reverse=True):  # the largest first, each to the least loaded
        least = loads.index(min(loads))
        shares[least].append(path)
        loads[least] += sizes[path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_IMPORT_ROOT, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", __name__, compression, "index" if index else "count", file_format]
    with contextlib.ExitStack() as files:
        errors = [files.enter_context(tempfile.TemporaryFile()) for _ in shares]  # not pipes: none fills up
        # A process group of their own, as transforms.convert_pool's: Ctrl-C reaches the runner only.
        running = [
            subprocess.Popen([*command, *share], stdout=subprocess.PIPE, stderr=err, env=env, process_group=0)
            for share, err in zip(shares, errors, strict=True)
        ]
        with concurrent.futures.ThreadPoolExecutor(len(running)) as threads:  # each answer counted as it comes
            answers = list(threads.map(functools.partial(_answers, on_counted=on_counted), running))
        counted = []
        for share, process, lines, err in zip(shares, running, answers, errors, strict=True):
            if process.returncode or len(lines) != len(share):
                err.seek(0)
                said = err.read().decode(errors="replace").strip().splitlines()
                answered = f"exit status {process.returncode}, {len(lines)} answers for {len(share)} shards"
                raise OSError(f"reading shards back in a process of its own failed: {said[-1] if said else answered}")
            counted += [ShardCount(*json_text.loads(line, ANSWER_CHARS)) for line in lines]
    return counted


def _answers(process: subprocess.Popen, on_counted: Callable[[], object]) -> list[bytes]:
    """What a counting process says, a line per shard as it counts it; once it has ended."""
    lines = []
    with process.stdout:
        for line in process.stdout:
            lines.append(line)
            on_counted()
    process.wait()
    return lines


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # missing: count_shard says so
        return 0


# python -m pipeline.shard_check COMPRESSION count|index FILE_FORMAT PATH...: a line per shard
if __name__ == "__main__":
    for shard in sys.argv[4:]:
        counted = count_shard(shard, sys.argv[1], sys.argv[2] == "index", sys.argv[3])
        print(json.dumps(dataclasses.astuple(counted)), flush=True)
