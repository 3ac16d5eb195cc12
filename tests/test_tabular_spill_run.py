"""A tabular run on the lean local runner, whose rows wait for their schema on disk
(transforms.tabular_spill), against the graph every other runner gets (the schema as a side input:
here the parallel runner): the same records byte for byte, the same dead letters, the same manifest;
and nothing of the spill left behind."""

from __future__ import annotations

import collections
import glob
import json
import os
import pathlib
import shutil

import pytest

from pipeline.cli import main
from pipeline.tfrecord_reader import read_records
from transforms.example_proto import Example

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample" / "tabular"


def comparable(manifest: dict) -> dict:
    """What a manifest says that two runs of the same input and settings must agree on: all but
    when and as which run, where the output went, and which shard took the odd records (each run
    starts its round robin at a random shard)."""
    kept = {key: value for key, value in manifest.items() if key not in ("created", "run", "options")}
    for split in kept["splits"].values():
        del split["shard_lengths"]
    return kept


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The sample tables (plain and .gz), a file with another header, and rows that make no record:
    too few fields, bytes that are not UTF-8, a value the declared schema refuses, a blank line."""
    root = tmp_path_factory.mktemp("tables")
    for path in SAMPLE.iterdir():
        shutil.copy(path, root / path.name)
    header = (SAMPLE / "part-000.csv").read_text().splitlines()[0]
    (root / "zz-other-header.csv").write_text("a,b\n1,2\n\n3,4\n")
    (root / "z-bad-rows.csv").write_bytes(
        f"{header}\n90001,1.5,2.5,3.5,4,blue,true,1\n90002,1\n90003,1,2,3,4,bl\xffue,true,1\n"
        f"90004,1,2,3,4,red,maybe,1\n\n90005,007,2,3,4,red,false,1\n".encode("latin-1")
    )
    return root


def convert(tables, out, *flags) -> pathlib.Path:
    config = out.parent / f"{out.name}.yaml"
    config.write_text("kind: csv\ncsv:\n  schema: {flag: bool}\n")
    argv = ["--config", str(config), "--input", str(tables / "*.csv*"), "--output", str(out)]
    assert main([*argv, "--max_error_fraction", "0.5", "--num_shards", "3", *flags]) == 0
    return out


def records(dataset) -> dict[str, collections.Counter]:
    by_split = collections.defaultdict(collections.Counter)
    for path in glob.glob(str(dataset / "*.tfrecord.gz")):
        by_split[os.path.basename(path).split("-")[0]].update(read_records(path, inside=None))
    return by_split


def dead_letters(dataset) -> list[str]:
    (path,) = glob.glob(str(dataset / "errors-*.jsonl"))
    return sorted(pathlib.Path(path).read_text().splitlines())


@pytest.fixture(scope="module")
def spilled(tables, tmp_path_factory):
    return convert(tables, tmp_path_factory.mktemp("lean") / "ds")


def test_the_spill_writes_what_the_side_input_graph_writes(tables, spilled, tmp_path):
    grouped = convert(tables, tmp_path / "parallel", "--direct_num_workers", "2")
    assert records(spilled) == records(grouped)
    assert sum(sum(split.values()) for split in records(spilled).values()) > 1000
    assert dead_letters(spilled) == dead_letters(grouped)
    lean, parallel = (comparable(json.loads((dataset / "manifest.json").read_text())) for dataset in (spilled, grouped))
    assert lean == parallel
    assert lean["warnings"], "the leading zero of 007 is reported by both"


def test_nothing_of_the_spill_is_left_in_the_dataset(spilled):
    hidden = [path.name for path in spilled.rglob(".*")]
    assert hidden == []


def test_a_shard_holds_its_rows_in_random_order(tmp_path):
    """Rows written in file order would give shards sorted as the file is (by time, by label):
    in one shard, ids in ascending order would be a 1 in 300! chance."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(500)))
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]) == 0
    (shard,) = glob.glob(str(out / "train-*.tfrecord.gz"))
    ids = [
        Example.FromString(record).features.feature["id"].int64_list.value[0]
        for record in read_records(shard, inside=None)
    ]
    assert len(ids) > 300 and ids != sorted(ids)
