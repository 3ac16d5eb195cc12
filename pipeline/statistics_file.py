"""The dataset's statistics file (core.contract.layout.STATISTICS_NAME): what the job's records
summed up (transforms.dataset_statistics), serialized once and checked before the run publishes:
the bytes the publication writes beside the records (pipeline.publish.Publication.publish) must
parse as a `DatasetFeatureStatisticsList` and count, split by split, the records the manifest
counts."""

from __future__ import annotations

from google.protobuf.message import DecodeError
from tensorflow_metadata.proto.v0 import statistics_pb2

from core import storage
from core.contract.layout import join
from core.contract.manifest import Manifest
from transforms.dataset_statistics import DatasetStatistics


def statistics_bytes(statistics: DatasetStatistics) -> bytes:
    return statistics.to_proto().SerializeToString()


def read_statistics(folder: str, manifest: Manifest) -> statistics_pb2.DatasetFeatureStatisticsList | None:
    """The statistics the manifest of the dataset in `folder` names; None when it names none.
    DecodeError when the file does not parse."""
    if not manifest.statistics_file:
        return None
    data = storage.read_bytes(join(folder, manifest.statistics_file), inside=folder)
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(data)


def statistics_problems(data: bytes, manifest: Manifest) -> list[str]:
    """Why the statistics `data` of the dataset of `manifest` cannot be trusted: they do not parse,
    or their records per split are not the manifest's (empty when they can)."""
    try:
        statistics = statistics_pb2.DatasetFeatureStatisticsList.FromString(data)
    except DecodeError:
        return [f"the statistics ({len(data):,} bytes) do not parse as a DatasetFeatureStatisticsList"]
    counted = {dataset.name: dataset.num_examples for dataset in statistics.datasets}
    expected = {name: split.records for name, split in manifest.splits.items() if split.records}
    if counted != expected:
        return [f"the statistics count {counted} records per split where the manifest counts {expected}"]
    return []
