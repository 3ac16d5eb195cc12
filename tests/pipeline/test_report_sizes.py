"""The summaries' sizes say what they measure: the records' serialized bytes (the manifest's, before
compression) and the shard files' size on disk, labelled with the manifest's compression."""

from __future__ import annotations

from core.contract.manifest import Counts, Manifest, SplitInfo
from pipeline.report import bytes_on_disk, dataset_summary, run_summary


def manifest(compression: str) -> Manifest:
    suffix = ".tfrecord.gz" if compression == "GZIP" else ".tfrecord"
    return Manifest(
        kind="csv",
        splits={
            "train": SplitInfo("train", 3, tuple(f"train-0000{i}-of-00002{suffix}" for i in (0, 1)), 3_000_000),
            "validation": SplitInfo("validation", 1, (f"validation-00000-of-00001{suffix}",), 1_000_000),
        },
        features={},
        counts=Counts(listed=4, written=4, converted=0, skipped=0, errors=0),
        compression=compression,
    )


def write_shards(folder, m: Manifest, size: int) -> None:
    for split in m.splits.values():
        for shard in split.shards:
            (folder / shard).write_bytes(b"x" * size)


def test_gzip_shards_show_serialized_and_on_disk_sizes(tmp_path):
    m = manifest("GZIP")
    write_shards(tmp_path, m, 500_000)
    assert bytes_on_disk(str(tmp_path), m) == {"train": 1_000_000, "validation": 500_000}
    text = "\n".join(dataset_summary(str(tmp_path), m))
    assert "  split          records  shards  MB serialized  MB on disk (GZIP)" in text
    assert "  train                3       2            3.0                1.0" in text
    assert "  total                4       3            4.0                1.5" in text
    summary = "\n".join(run_summary(m, str(tmp_path), 1.0))
    assert "3.0 MB serialized, 1.0 MB on disk (GZIP)" in summary


def test_uncompressed_shards_say_so(tmp_path):
    m = manifest("NONE")
    write_shards(tmp_path, m, 1_000_000)
    assert "MB on disk (uncompressed)" in "\n".join(dataset_summary(str(tmp_path), m))
    assert "1.0 MB serialized, 1.0 MB on disk (uncompressed)" in "\n".join(run_summary(m, str(tmp_path), 1.0))


def test_without_the_shards_only_the_serialized_size_is_shown(tmp_path):
    m = manifest("GZIP")  # e.g. a rejected run, whose shards are deleted
    assert bytes_on_disk(str(tmp_path), m) is None
    assert bytes_on_disk(str(tmp_path / "missing"), m) is None
    text = "\n".join(dataset_summary(str(tmp_path), m))
    assert "MB serialized" in text and "on disk" not in text
    assert "on disk" not in "\n".join(run_summary(m, str(tmp_path), 1.0))
