"""Every committed dataset carries the statistics the job computed in its own pass
(statistics.pb, named by the manifest's statistics_file): tensorflow_metadata parses them, their
counts are the manifest's and the records', TFDV loads them and validates against them, and a
statistics file that is missing, damaged or counts other records stops the run's publication."""

from __future__ import annotations

import json
import pathlib
import subprocess

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_metadata.proto.v0 import statistics_pb2

from core import storage
from core.contract.manifest import read_manifest
from pipeline.cli import main
from pipeline.statistics_file import statistics_problems
from tests.pipeline.test_drift import tfdv_python  # noqa: F401 (the fixture)

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample"


def converted(tmp_path_factory, *argv) -> pathlib.Path:
    out = tmp_path_factory.mktemp("statistics") / "out"
    assert main([*argv, "--output", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> pathlib.Path:
    return converted(tmp_path_factory, "--input", str(SAMPLE / "images"))


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> pathlib.Path:
    return converted(tmp_path_factory, "--kind", "csv")


def statistics_of(folder: pathlib.Path) -> dict[str, dict[str, statistics_pb2.FeatureNameStatistics]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    parsed = statistics_pb2.DatasetFeatureStatisticsList.FromString((folder / manifest["statistics_file"]).read_bytes())
    assert {d.name: d.num_examples for d in parsed.datasets} == {n: s["records"] for n, s in manifest["splits"].items()}
    return {d.name: {f.path.step[0]: f for f in d.features} for d in parsed.datasets}


def records(folder: pathlib.Path, split: str) -> list[dict]:
    manifest = json.loads((folder / "manifest.json").read_text())
    rows = []
    for shard in manifest["splits"][split]["shards"]:
        for data in tf.data.TFRecordDataset(str(folder / shard), compression_type="GZIP").as_numpy_iterator():
            example = tf.train.Example.FromString(data).features.feature
            rows.append({k: v.int64_list.value or v.float_list.value or v.bytes_list.value for k, v in example.items()})
    return rows


def test_image_statistics_count_the_manifests_labels_and_the_records_sizes(images):
    manifest = json.loads((images / "manifest.json").read_text())
    for split, features in statistics_of(images).items():
        labels = {t.label: t.sample_count for t in features["image/class/text"].string_stats.rank_histogram.buckets}
        assert labels == manifest["splits"][split]["label_counts"]
        stored = records(images, split)
        for key in ("image/width", "image/height"):
            values = [row[key][0] for row in stored]
            stats = features[key].num_stats
            assert (stats.min, stats.max, stats.mean) == pytest.approx((min(values), max(values), np.mean(values)))
        sizes = [len(row["image/encoded"][0]) for row in stored]
        assert features["image/stored_bytes"].num_stats.mean == pytest.approx(np.mean(sizes))
        formats = {t.value: t.frequency for t in features["image/format"].string_stats.top_values}
        assert formats == {f: sum(row["image/format"][0].decode() == f for row in stored) for f in formats}


def test_table_statistics_count_each_columns_values_and_missing_ones(table):
    for split, features in statistics_of(table).items():
        stored = records(table, split)
        for name, feature in features.items():
            stats = feature.num_stats if feature.HasField("num_stats") else feature.string_stats
            present = [row[name][0] for row in stored if name in row]
            assert stats.common_stats.num_non_missing == len(present), name
            assert stats.common_stats.num_missing == len(stored) - len(present), name
            if feature.HasField("num_stats") and present:
                assert feature.num_stats.mean == pytest.approx(np.mean(present), rel=1e-6), name


def test_tfdv_loads_the_statistics_and_validates_against_them(images, table, tfdv_python):  # noqa: F811
    script = """
import sys
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import statistics_pb2
for path in sys.argv[1:]:
    every = tfdv.load_stats_binary(path)
    for dataset in every.datasets:
        one = statistics_pb2.DatasetFeatureStatisticsList(datasets=[dataset])
        schema = tfdv.infer_schema(one)
        anomalies = tfdv.validate_statistics(one, schema, previous_statistics=one)
        assert not anomalies.anomaly_info, anomalies
        print(path, dataset.name, len(schema.feature))
"""
    files = [str(folder / "statistics.pb") for folder in (images, table)]
    done = subprocess.run([tfdv_python, "-c", script, *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout.splitlines()) == 4


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda data: data[:-7], "do not parse as a DatasetFeatureStatisticsList"),
        (lambda data: b"", "the statistics count {} records per split"),
        (lambda data: data[: len(data) // 2] + b"\xff" * 9, "do not parse"),
    ],
)
def test_statistics_that_do_not_parse_or_count_other_records_are_a_problem(images, damage, problem):
    manifest = read_manifest(str(images), storage.text_reader(str(images)))
    data = (images / "statistics.pb").read_bytes()
    assert statistics_problems(data, manifest) == []
    assert any(problem in line for line in statistics_problems(damage(data), manifest))
