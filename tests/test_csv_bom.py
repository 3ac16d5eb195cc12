"""A UTF-8 byte order mark at the start of a tabular CSV is not part of its first column name,
whether the file sorts first (its header is the dataset's) or later (its header is compared)."""

from __future__ import annotations

import pytest

from pipeline.cli import main
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from transforms.tabular import read_header

HEADER = "id,name,score\n"


@pytest.mark.parametrize("bom_in", ["a.csv", "b.csv", "both"])
def test_a_bom_in_any_file_is_not_part_of_the_header(tmp_path, bom_in):
    data = tmp_path / "data"
    data.mkdir()
    for name, rows in (("a.csv", "1,x,0.5\n2,y,1.5\n"), ("b.csv", "3,z,2.5\n")):
        bom = "\ufeff" if bom_in in (name, "both") else ""
        (data / name).write_text(bom + HEADER + rows, encoding="utf-8")
    assert read_header(str(data / "a.csv"))[0] == ("id", "name", "score")
    out = tmp_path / "ds"
    assert main(["--kind", "csv", "--input", str(data / "*.csv"), "--output", str(out), "--num_shards", "1"]) == 0
    manifest = load_manifest(out)
    assert (manifest.counts.listed, manifest.counts.written, manifest.counts.errors) == (3, 3, 0)
    assert read_dead_letters(out) == []
    assert "id" in manifest.features and manifest.features["id"].dtype == "int64"
    ids = sorted(r["id"] for split in manifest.splits for r in read_split(out, split))
    assert ids == [1, 2, 3]


def test_a_bom_in_a_gzipped_csv(tmp_path):
    import gzip

    (tmp_path / "a.csv.gz").write_bytes(gzip.compress(("\ufeff" + HEADER + "1,x,0.5\n").encode()))
    assert read_header(str(tmp_path / "a.csv.gz"))[0] == ("id", "name", "score")
