"""Datasets for the trainer and inspect tests: the bundled sample, converted by the real pipeline
CLI (in-process) once per test session.

The conversions are memoised here, at module level, so that tests/test_inspect.py (which imports
`converted` from this module) and the trainer tests share one conversion of each kind.
"""

from __future__ import annotations

import csv
import pathlib
import random

import pytest

from pipeline.cli import main

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample"
# The flag column declared bool (stored int64 0/1), as a user would configure it.
CSV_CONFIG = "csv:\n  schema: {flag: bool}\n"

_CONVERTED: dict[str, pathlib.Path] = {}


@pytest.fixture(autouse=True)
def float32_policy():
    """Runs set Keras' global dtype policy; leave it as other tests expect it."""
    yield
    import keras

    keras.mixed_precision.set_dtype_policy("float32")


def args(*argv):
    """The trainer's flags, parsed as `python -m trainer ARGV` parses them."""
    from trainer import train

    return train.parser().parse_args([str(a) for a in argv])


def converted(kind: str, tmp_path_factory) -> pathlib.Path:
    """The bundled sample of `kind` ('images': 2 shards per split; 'csv'), converted once."""
    if kind not in _CONVERTED:
        out = tmp_path_factory.mktemp(f"converted_{kind}") / "dataset"
        if kind == "images":
            argv = ["--input", str(SAMPLE / "images"), "--num_shards", "2"]
        elif kind == "csv":
            config = tmp_path_factory.mktemp("csv_config") / "csv.yaml"
            config.write_text(CSV_CONFIG)
            argv = ["--kind", "csv", "--input", str(SAMPLE / "tabular" / "*.csv*"), "--config", str(config)]
        else:
            raise ValueError(kind)
        assert main([*argv, "--output", str(out)]) == 0
        assert (out / "manifest.json").exists()
        _CONVERTED[kind] = out
    return _CONVERTED[kind]


@pytest.fixture(scope="session")
def image_dataset(tmp_path_factory) -> pathlib.Path:
    return converted("images", tmp_path_factory)


@pytest.fixture(scope="session")
def tabular_dataset(tmp_path_factory) -> pathlib.Path:
    return converted("csv", tmp_path_factory)


# Iris-like: three classes, well apart in four number columns of different scales (cm).
CENTERS = ((5.0, 3.4, 1.46, 0.25), (5.94, 2.77, 4.26, 1.33), (6.59, 2.97, 5.55, 2.03))
SPREADS = ((0.35, 0.38, 0.17, 0.1), (0.5, 0.31, 0.47, 0.2), (0.64, 0.32, 0.55, 0.27))
IRIS_HEADER = ("sepal_length", "sepal_width", "petal_length", "petal_width", "species")


SPECIES = ("setosa", "versicolor", "virginica")


def named_rows(rows: list[list]) -> list[list]:
    """separated_rows with each class id named by its species, as a table's string label."""
    return [[*row[:-1], SPECIES[row[-1]]] for row in rows]


def separated_rows(n: int, seed: int = 0, offset: float = 0.0) -> list[list]:
    """`n` rows of IRIS_HEADER, classes 0, 1, 2 in turn; `offset` is added to every number (a
    column's mean far from 0 is what an input normalisation must take out)."""
    rng = random.Random(seed)
    return [
        [f"{offset + rng.gauss(c, s):.4f}" for c, s in zip(CENTERS[i % 3], SPREADS[i % 3], strict=True)] + [i % 3]
        for i in range(n)
    ]


def convert_table(folder: pathlib.Path, header, rows, *flags: str) -> pathlib.Path:
    """`rows` under `header` as a CSV in `folder`, converted by the pipeline's CLI (in-process) as
    `python -m pipeline --kind csv --input 'folder/csv/*.csv' --output folder/dataset FLAGS` would:
    the dataset folder."""
    source = folder / "csv"
    source.mkdir(parents=True)
    with open(source / "table.csv", "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    out = folder / "dataset"
    assert main(["--kind", "csv", "--input", str(source / "*.csv"), "--output", str(out), *flags]) == 0
    return out
