"""Reading every written shard back before anything is published, and comparing what the shards
hold with what the job produced.

The job's counts come from a side branch of the records, so a runner that drops records between
producing and writing them (Beam 2.77's data plane can: README, Trust) would otherwise publish a
manifest that promises records the shards do not hold. The read-back checks what TensorFlow's
reader checks (pipeline.tfrecord_reader), or for ArrayRecord files what array_record's reader checks
(every chunk's hash), and counts the records of each shard; with `index: true`
it also writes each uncompressed shard's record index from the same pass.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from core.contract.layout import TFRECORD, ShardedFileTemplate, join
from pipeline.planning import Plan
from pipeline.shard_check import ShardCount, count_shard, count_shards
from transforms import progress, stopping
from transforms.counting import counter


def planned_shards(folder: str, plan: Plan) -> list[str]:
    """The paths of every shard the plan asks for."""
    names = plan.record_files
    return [join(folder, names.name(split, i, total)) for split, total in plan.shards.items() for i in range(total)]


@beam.ptransform_fn
def ReadBackShards(root, folder: str, plan: Plan, written, spread: bool = True, processes: int = 0):
    """Counts the records of every planned shard once the writes are done (`written`: the
    PCollection of file names they return), the shards spread over the workers when `spread`
    (pipeline.runners.spreads_work), read in `processes` processes at once if given
    (CountShardRecords). The planned names, not `written` itself, feed the read-back:
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
    reading_back = progress.Phase("reading back", "shards", sum(plan.shards.values()))
    counting = CountShardRecords(plan.compression, plan.index, processes, reading_back, plan.file_format)
    return paths | "CountRecords" >> beam.ParDo(counting)


class CountShardRecords(beam.DoFn):
    """Reads each shard back (pipeline.shard_check) and counts it. A missing or broken shard is a
    verdict (ShardCount.error), not a failure of the step; an I/O error fails the bundle, which
    the runner retries. With `processes` (a local run's local shards) a bundle's shards are read
    when it ends, in that many processes at once if they are large enough to gain from it. Each
    shard counts into `reading_back` (transforms.progress) as it is read."""

    def __init__(
        self,
        compression: str,
        index: bool,
        processes: int = 0,
        reading_back: progress.Phase | None = None,
        file_format: str = TFRECORD,
    ):
        self._compression, self._index, self._processes = compression, index, processes
        self._reading_back = reading_back or progress.Phase("reading back", "shards")
        self._file_format = file_format

    def start_bundle(self):
        self._paths = []

    def process(self, path: str):
        if self._processes:
            self._paths.append(path)
            return
        shard = count_shard(path, self._compression, self._index, self._file_format)
        self._reading_back.add()
        yield self._counted(shard)

    def finish_bundle(self):
        if self._paths:
            read = count_shards(
                self._paths, self._compression, self._index, self._processes, self._reading_back.add, self._file_format
            )
            for shard in read:
                yield GlobalWindows.windowed_value(self._counted(shard))

    def _counted(self, shard: ShardCount) -> ShardCount:
        stopping.check()
        counter("shards_unreadable" if shard.error else "shards_read_back").inc()
        return shard


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
