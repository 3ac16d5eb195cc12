"""Reading every written shard back before anything is published, and comparing what the shards
hold with what the job produced.

The job's counts come from a side branch of the records, so a runner that drops records between
producing and writing them (Beam 2.77's data plane can: README, Trust) would otherwise publish a
manifest that promises records the shards do not hold. The read-back checks what TensorFlow's
reader checks (pipeline.tfrecord_reader) and counts the records of each shard; with `index: true`
it also writes each uncompressed shard's record index from the same pass.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam

from pipeline import storage
from pipeline.contract.layout import INDEX_SUFFIX, ShardedFileTemplate, join
from pipeline.planning import Plan
from pipeline.tfrecord_framing import FRAMING_BYTES
from pipeline.tfrecord_reader import RecordError, read_framed_records
from transforms.counting import counter


@dataclasses.dataclass(frozen=True)
class ShardCount:
    """One shard as read back: its file name, its records, and why it cannot be read ("" if it can)."""

    name: str
    records: int
    error: str = ""


def planned_shards(folder: str, plan: Plan) -> list[str]:
    """The paths of every shard the plan asks for."""
    names = plan.record_files
    return [join(folder, names.name(split, i, total)) for split, total in plan.shards.items() for i in range(total)]


@beam.ptransform_fn
def ReadBackShards(root, folder: str, plan: Plan, written, spread: bool = True):
    """Counts the records of every planned shard once the writes are done (`written`: the
    PCollection of file names they return), the shards spread over the workers when `spread`
    (pipeline.runners.spreads_work). The planned names, not `written` itself, feed the read-back:
    on the BundleBasedDirectRunner the elements downstream of a write's output arrive after the
    watermark has passed them, so a combine or side input of them comes out empty."""
    paths = (
        root
        | "Start" >> beam.Impulse()
        | "AfterTheWrites"
        >> beam.FlatMap(lambda _, written, planned: planned, beam.pvalue.AsList(written), planned_shards(folder, plan))
    )
    if spread:
        paths = paths | "SpreadShards" >> beam.Reshuffle()
    return paths | "CountRecords" >> beam.ParDo(CountShardRecords(plan.compression, plan.index))


def index_text(framed: list[tuple[int, int]]) -> str:
    """A record index: one `offset length` line per record (offset of its header in the file,
    length including the framing), as DALI's and the `tfrecord` package's tfrecord2idx write it."""
    return "".join(f"{offset} {length}\n" for offset, length in framed)


class CountShardRecords(beam.DoFn):
    """Reads a shard back record by record (and, with `index`, writes `<shard>.idx` beside it). A
    missing or broken shard is a verdict (ShardCount.error), not a failure of the step; an I/O
    error fails the bundle, which the runner retries."""

    def __init__(self, compression: str, index: bool):
        self._compression, self._index = compression, index

    def process(self, path: str):
        if not storage.exists(path):
            counter("shards_unreadable").inc()
            yield ShardCount(storage.basename(path), 0, "missing")
            return
        framed = []
        try:
            for offset, data in read_framed_records(path, self._compression):
                framed.append((offset, len(data) + FRAMING_BYTES))
        except RecordError as e:
            counter("shards_unreadable").inc()
            yield ShardCount(storage.basename(path), len(framed), f"record {e.record}: {e.message}")
            return
        if self._index:
            storage.write_bytes(path + INDEX_SUFFIX, index_text(framed).encode(), "text/plain")
        counter("shards_read_back").inc()
        yield ShardCount(storage.basename(path), len(framed))


def shard_problems(
    template: ShardedFileTemplate,
    planned: dict[str, int],
    produced: dict[str, int],
    counted: list[ShardCount],
    written: list[str],
) -> list[str]:
    """Why the shards cannot be trusted: `template` names the shards, `planned` {split: shard count},
    `produced` {split: records the job produced}, `counted` the planned shards as read back,
    `written` the names the writes returned. Empty when every planned shard, and nothing else, was
    written and read back whole, and each split's shards hold exactly the records the job produced."""
    found = [f"shard {c.name} cannot be read: {c.error}" for c in sorted(counted, key=lambda c: c.name) if c.error]
    names = sorted(c.name for c in counted)
    if len(set(names)) != len(names):
        found.append(f"shards read back more than once: {sorted({n for n in names if names.count(n) > 1})}")
    extra = sorted(set(written) - set(names))
    if extra:
        found.append(f"shards written that the plan does not name: {extra}")
    for split in planned:
        held = sum(c.records for c in counted if template.is_shard_of(c.name, split))
        if held != produced.get(split, 0):
            found.append(
                f"split {split}: its shards hold {held} records but the job produced {produced.get(split, 0)} "
                "(records lost or duplicated between producing and writing them)"
            )
    return found
