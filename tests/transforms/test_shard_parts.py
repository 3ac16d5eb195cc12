"""Records written into shard parts as they are made, then finalized on the DirectRunner: every
planned shard exists under its name and TensorFlow reads exactly the records the successful
bundles wrote (one part renamed, several joined, none an empty shard), a failed attempt's part
reaches no shard, and the parts folder is gone. Both ways parts are written: by the bundle's thread
(BundleShards, gs:// parts) and appended to by whoever makes a record (SharedParts, local parts)."""

import os

import apache_beam as beam
import pytest
import tensorflow as tf
from apache_beam.testing.util import assert_that, equal_to

from core.contract.layout import GZIP, SHARD_PARTS_FOLDER, UNCOMPRESSED
from pipeline.tfrecord_reader import read_records
from transforms.gzip_pieces import IncompletePart
from transforms.outcomes import Written
from transforms.part_appender import PartAppender, processes_may_append
from transforms.shard_parts import BundleShards, FinalizeShards, ShardLayout, SharedParts


class Appending:
    """SharedParts with BundleShards' calls, as ReadImagesIntoShards uses them: each record
    appended by a PartAppender, as a converting thread or process appends it, and reported back;
    one worth deflating handed back and written by the bundle (`handed_back`)."""

    def __init__(self, layout: ShardLayout):
        self.parts, self._appender = SharedParts(layout), PartAppender(layout.compression)
        self.handed_back = BundleShards(layout)

    def write(self, split: str, payload: bytes) -> None:
        part = self.parts.assign(split)
        piece = self._appender.append(part, payload)
        if piece is None:
            self.handed_back.write(split, payload)
        else:
            self.parts.add(Written(split, "label", False, len(payload), part, piece))

    def close(self):
        self._appender.release()
        return [*self.parts.close(), *self.handed_back.close()]


WRITERS = [BundleShards, Appending]


def _tf_records(path: str, compression: str) -> list[bytes]:
    kind = "GZIP" if compression == GZIP else ""
    return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=kind)]


def _planned(layout: ShardLayout) -> list[str]:
    return [layout.shard_path(split, i) for split, total in layout.shards.items() for i in range(total)]


def _finalize(layout: ShardLayout, parts) -> None:
    """Runs FinalizeShards, which must output every planned shard's path."""
    with beam.Pipeline() as p:
        finalized = p | beam.Create(parts) | FinalizeShards(layout)
        assert_that(finalized, equal_to(_planned(layout)))


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("compression", [GZIP, UNCOMPRESSED])
def test_each_shard_holds_what_its_bundles_wrote_and_nothing_else(tmp_path, compression, writer):
    layout = ShardLayout(str(tmp_path), {"train": 3, "validation": 2}, compression)
    one = writer(layout)
    for i in range(10):
        one.write("train", b"first-%d" % i)
    one.write("validation", b"first-validation")
    failed = writer(layout)  # an attempt that fails: its parts are never reported
    for i in range(6):
        failed.write("train", b"failed-%d" % i)
    failed.close()
    two = writer(layout)
    for i in range(4):
        two.write("train", b"second-%d" % i)
    parts = [*one.close(), *two.close()]
    assert sum(part.records for part in parts) == 15
    assert {part.split for part in parts} == {"train", "validation"}

    _finalize(layout, parts)

    held = {path: _tf_records(path, compression) for path in _planned(layout)}
    train = sorted(r for path, records in held.items() if "/train-" in path for r in records)
    assert train == sorted([b"first-%d" % i for i in range(10)] + [b"second-%d" % i for i in range(4)])
    assert sorted(len(held[layout.shard_path("train", i)]) for i in range(3)) in ([4, 5, 5], [4, 4, 6])
    validation = [held[layout.shard_path("validation", i)] for i in range(2)]
    assert sorted(validation) == [[], [b"first-validation"]]  # the shard no record reached is empty, and valid
    for path in held:  # the job's own read-back agrees with TensorFlow
        assert list(read_records(path, compression, inside=None)) == held[path]
    assert not (tmp_path / SHARD_PARTS_FOLDER).exists()


@pytest.mark.parametrize("writer", WRITERS)
def test_records_are_spread_round_robin_over_the_splits_shards(tmp_path, writer):
    layout = ShardLayout(str(tmp_path), {"train": 4}, GZIP)
    bundle = writer(layout)
    for i in range(10):
        bundle.write("train", b"%d" % i)
    parts = bundle.close()
    assert sorted(part.records for part in parts) == [2, 2, 3, 3]
    assert sorted(part.index for part in parts) == [0, 1, 2, 3]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_record_of_an_unplanned_split_raises(tmp_path, writer):
    bundle = writer(ShardLayout(str(tmp_path), {"train": 1}, GZIP))
    with pytest.raises(ValueError, match="split 'test', which the plan does not name"):
        bundle.write("test", b"stray")


@pytest.mark.parametrize("compression", [GZIP, UNCOMPRESSED])
def test_a_part_holding_bytes_nobody_reported_is_refused(tmp_path, compression):
    """As a process killed halfway through an append leaves it."""
    appending = Appending(ShardLayout(str(tmp_path), {"train": 1}, compression))
    appending.write("train", b"whole")
    with open(appending.parts.assign("train"), "ab") as part:
        part.write(b"half a record")
    with pytest.raises(IncompletePart, match="a converting process died while writing to it"):
        appending.close()


MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
server:/export /data nfs4 rw,relatime 0 0
/dev/vdb /data/scratch xfs rw 0 0
tmpfs /mnt/with\\040space tmpfs rw 0 0
fuse /mnt/bucket fuse.gcsfuse rw 0 0
"""


@pytest.mark.parametrize(
    "path, shared",
    [
        ("/home/me/out", True),  # ext4
        ("/data/out", False),  # NFS: appends from several clients' processes may not land whole
        ("/data/scratch/out", True),  # the longest mount point holds it
        ("/data/scratchpad/out", False),  # a name that only starts like a mount point
        ("/mnt/with space/out", True),
        ("/mnt/bucket/out", False),  # a FUSE mount
    ],
)
def test_processes_share_parts_only_on_local_file_systems(path, shared):
    assert processes_may_append(path, MOUNTS) == shared


def test_this_machines_temporary_folder_is_one_processes_may_share(tmp_path):
    assert processes_may_append(str(tmp_path))


def test_records_worth_deflating_are_handed_back_and_deflated_as_one_stream(tmp_path):
    """Each deflated on its own they would gain little (gzip_pieces): the bundle writes them."""
    layout = ShardLayout(str(tmp_path), {"train": 2}, GZIP)
    appending = Appending(layout)
    payloads = [b"image/encoded image/class/label label-%d " % i * 40 for i in range(200)]
    for payload in payloads:
        appending.write("train", payload)
    parts = appending.close()
    assert len(parts) == 2 and sum(p.records for p in parts) == 200, (
        "only the bundle's parts: the shared ones are empty"
    )
    _finalize(layout, parts)

    shards = [layout.shard_path("train", i) for i in range(2)]
    assert sorted(r for path in shards for r in _tf_records(path, GZIP)) == sorted(payloads)
    on_disk = sum(os.path.getsize(path) for path in shards)
    assert on_disk < 0.1 * sum(map(len, payloads)), "deflated as a stream, not record by record"
