"""The dataset's statistics file (core.contract.layout.STATISTICS_NAME): written by the job from
what its records summed up (transforms.dataset_statistics), beside the records in the run's own
folder, and checked before the run publishes like the shards are: it must parse as a
`DatasetFeatureStatisticsList` and count, split by split, the records the manifest counts."""

from __future__ import annotations

from google.protobuf.message import DecodeError
from tensorflow_metadata.proto.v0 import statistics_pb2

from core import storage
from core.contract.layout import STATISTICS_NAME, join
from core.contract.manifest import Manifest
from transforms.dataset_statistics import DatasetStatistics


def write_statistics(folder: str, statistics: DatasetStatistics) -> str:
    """Writes the statistics into `folder` (a run's own); returns the file's name."""
    storage.write_atomically(join(folder, STATISTICS_NAME), statistics.to_proto().SerializeToString())
    return STATISTICS_NAME


def read_statistics(folder: str, manifest: Manifest) -> statistics_pb2.DatasetFeatureStatisticsList | None:
    """The statistics the manifest of the dataset in `folder` names; None when it names none.
    DecodeError when the file does not parse."""
    if not manifest.statistics_file:
        return None
    data = storage.read_bytes(join(folder, manifest.statistics_file), inside=folder)
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(data)


def statistics_problems(folder: str, manifest: Manifest) -> list[str]:
    """Why the statistics of the dataset in `folder` cannot be trusted: the file is missing or does
    not parse, or its records per split are not the manifest's (empty when they can)."""
    try:
        statistics = read_statistics(folder, manifest)
    except (OSError, DecodeError) as e:
        return [f"the statistics file {manifest.statistics_file} cannot be read: {type(e).__name__}"]
    if statistics is None:
        return []
    counted = {dataset.name: dataset.num_examples for dataset in statistics.datasets}
    expected = {name: split.records for name, split in manifest.splits.items() if split.records}
    if counted != expected:
        return [f"the statistics count {counted} records per split where the manifest counts {expected}"]
    return []
