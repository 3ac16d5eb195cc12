"""pipeline.drift measures drift as TFDV does: on generated pairs of columns, written as the job's
statistics, its L-infinity distances and Jensen-Shannon divergences equal those TFDV's
validate_statistics reports for the same files (TFDV in a venv of its own: scripts/tfdv_venv.sh)."""

from __future__ import annotations

import json
import pathlib
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.drift import js_divergence, linf_distance
from transforms.dataset_statistics import DatasetStatistics

ROOT = pathlib.Path(__file__).resolve().parents[2]
TFDV_DRIFT = """
import json, sys
import tensorflow_data_validation as tfdv
out = []
for before, after in json.load(sys.stdin):
    a, b = tfdv.load_stats_binary(before), tfdv.load_stats_binary(after)
    schema = tfdv.infer_schema(a)
    tfdv.get_feature(schema, "x").drift_comparator.jensen_shannon_divergence.threshold = 1e-12
    tfdv.get_feature(schema, "c").drift_comparator.infinity_norm.threshold = 1e-12
    found = tfdv.validate_statistics(b, schema, previous_statistics=a)
    out.append({d.path.step[0]: d.drift_measurements[0].value for d in found.drift_skew_info})
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def tfdv_python() -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/tfdv_venv.sh"), str(ROOT / ".venv-tfdv")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


SHAPES = ("normal", "uniform", "few values", "one value")


def column_spec(rng: np.random.Generator) -> dict:
    """A column to generate: the shape of its numbers, and how many categories it has."""
    return {
        "shape": SHAPES[rng.integers(len(SHAPES))],
        "centre": float(rng.uniform(-5, 5)),
        "spread": float(rng.uniform(0.1, 10)),
        "records": int(rng.integers(1, 3000)),
        "categories": int(rng.integers(1, 30)),
        "seed": int(rng.integers(2**32)),
    }


def column(spec: dict) -> DatasetStatistics:
    rng = np.random.default_rng(spec["seed"])
    n, centre, spread = spec["records"], spec["centre"], spec["spread"]
    numbers = {
        "normal": lambda: rng.normal(centre, spread, n),
        "uniform": lambda: rng.uniform(centre - spread, centre + spread, n),
        "few values": lambda: rng.integers(0, 5, n) * spread + centre,
        "one value": lambda: np.full(n, centre),
    }[spec["shape"]]()
    categories = rng.zipf(1.5, n) % spec["categories"]
    statistics = DatasetStatistics()
    for x, c in zip(numbers.tolist(), categories.tolist(), strict=True):
        statistics.add("train", {"x": float(x), "c": f"class {c}"})
    return statistics


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_drift_is_measured_as_tfdv_measures_it(seed, tfdv_python, tmp_path_factory):
    """40 pairs of columns a run, each checked by TFDV (one process a run: TFDV takes seconds to
    start)."""
    rng = np.random.default_rng(seed)
    pairs = [(column_spec(rng), column_spec(rng)) for _ in range(40)]
    folder = tmp_path_factory.mktemp("drift")
    files, ours = [], []
    for i, specs in enumerate(pairs):
        protos = [column(spec).to_proto() for spec in specs]
        paths = [folder / f"{i}-{side}.pb" for side in ("before", "after")]
        for path, proto in zip(paths, protos, strict=True):
            path.write_bytes(proto.SerializeToString())
        files.append([str(p) for p in paths])
        features = [{f.path.step[0]: f for f in proto.datasets[0].features} for proto in protos]
        counts = [{b.label: b.sample_count for b in f["c"].string_stats.rank_histogram.buckets} for f in features]
        histograms = [f["x"].num_stats.histograms[0] for f in features]
        ours.append({"x": js_divergence(*histograms), "c": linf_distance(*counts)[1]})
    done = subprocess.run([tfdv_python, "-c", TFDV_DRIFT], input=json.dumps(files), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    for mine, tfdv, specs in zip(ours, theirs, pairs, strict=True):
        assert mine["c"] == pytest.approx(tfdv.get("c", 0.0), abs=1e-9), specs
        assert mine["x"] == pytest.approx(tfdv.get("x", 0.0), abs=1e-9), specs
