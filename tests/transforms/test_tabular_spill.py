"""The spill of tabular rows (transforms.tabular_spill): every row read comes back once, typed by
the same schema, in random order, with no more than a bucket held in memory."""

import collections
import functools
import operator
import os
import random
import tracemalloc

import pytest
from apache_beam.io.filesystem import FileMetadata

from transforms.outcomes import DeadLetter
from transforms.tabular import InferSchema, ReadCsvRows, Row
from transforms.tabular_spill import (
    SpillFile,
    SpillRows,
    bucket_count,
    frame,
    merge_spills,
    permuted_rows,
)

COLUMNS = ("id", "score", "name")
FRACTIONS = (("train", 0.8), ("validation", 0.2))
SPLITS = ("train", "validation")


def write_csv(path, rows: int, width: int = 1) -> str:
    lines = ["id,score,name"] + [f"{i},{i / 7:.3f},{'name ' * width}{i % 13}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def spill(paths, folder, buckets: int):
    """SpillRows over `paths` in one bundle: (its Spilled, its dead letters)."""
    infer = InferSchema(COLUMNS, {})
    reading = SpillRows(os.path.dirname(paths[0]), COLUMNS, FRACTIONS, ",", infer, folder, buckets)
    reading.setup()
    reading.start_bundle()
    outputs = [out for path in paths for out in reading.process(FileMetadata(path, os.path.getsize(path)))]
    (report,) = [window.value for window in reading.finish_bundle()]
    return report, [out.value for out in outputs]


def read_rows(paths):
    """What ReadCsvRows outputs for the same files: the rows the graph of other runners sees."""
    reading = ReadCsvRows(os.path.dirname(paths[0]), COLUMNS, FRACTIONS)
    return [out for path in paths for out in reading.process(FileMetadata(path, 0))]


def test_every_row_comes_back_once_in_another_order(tmp_path):
    paths = [write_csv(tmp_path / "a.csv", 1500), write_csv(tmp_path / "b.csv", 700)]
    report, dead = spill(paths, str(tmp_path / "spill"), buckets=4)
    assert dead == []
    (spilled,) = merge_spills([report], InferSchema(COLUMNS, {}))
    assert len(spilled.buckets) == 4
    rng = random.Random()
    back = [row for bucket in spilled.buckets for row in permuted_rows(bucket, SPLITS, rng)]
    expected = read_rows(paths)
    assert collections.Counter(back) == collections.Counter(expected)
    assert back != expected


def test_the_schema_is_the_one_inferred_over_every_row(tmp_path):
    paths = [write_csv(tmp_path / "a.csv", 300)]
    with open(paths[0], "a") as f:
        f.write("0042,n/a,x\n")  # a leading zero, and a value that makes `score` text
    report, _ = spill(paths, str(tmp_path / "spill"), buckets=3)
    (spilled,) = merge_spills([report], InferSchema(COLUMNS, {}))
    infer = InferSchema(COLUMNS, {})
    tallies = infer.create_accumulator()
    for row in read_rows(paths):
        infer.add_input(tallies, row)
    assert spilled.schema == infer.extract_output(tallies)
    assert spilled.schema["score"].dtype == "string" and spilled.schema["id"].leading_zeros


def test_no_rows_give_the_schema_of_no_data():
    infer = InferSchema(COLUMNS, {})
    (spilled,) = merge_spills([], infer)
    assert spilled.buckets == ()
    assert spilled.schema == infer.extract_output(infer.create_accumulator())


def test_rows_that_are_no_records_are_dead_letters_as_before(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"id,score,name\n1,2.5,ok\n2,3\n3,4.5,caf\xe9\n\n4,5.5,fine\n")
    report, dead = spill([str(path)], str(tmp_path / "spill"), buckets=2)
    assert dead == [out.value for out in read_rows([str(path)]) if not isinstance(out, Row)]
    assert [letter.source.rsplit(":", 1)[1] for letter in dead] == ["3", "4"]
    assert all(isinstance(letter, DeadLetter) for letter in dead)
    assert sum(spill_file.rows for _, spill_file in report.files) == 2


@pytest.mark.parametrize(
    "values",
    [
        ("1", "", "plain"),
        ("2", "x", 'a "quoted", multi\nline value'),
        ("3", "\x00", "NUL and \x7f"),
        ("4", "é", "日本語 and 🦀"),
        ("5", "", ""),
    ],
)
def test_a_frame_keeps_any_text_a_row_holds(tmp_path, values):
    path = tmp_path / "bucket"
    path.write_bytes(frame(0, 17, 1, values))
    bucket = [SpillFile(str(path), ("data/t.csv",), 1, path.stat().st_size)]
    assert list(permuted_rows(bucket, SPLITS, random.Random())) == [Row("data/t.csv:17", "validation", values)]


def test_a_bucket_past_its_size_is_split_and_never_held_whole(tmp_path):
    paths = [write_csv(tmp_path / "a.csv", 20_000, width=40)]
    report, _ = spill(paths, str(tmp_path / "spill"), buckets=1)
    ((_, whole),) = report.files
    rows, checksum = 0, 0
    tracemalloc.start()
    try:
        for row in permuted_rows([whole], SPLITS, random.Random(), bucket_bytes=whole.size // 16):
            rows, checksum = rows + 1, checksum ^ hash(row)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    expected = read_rows(paths)
    assert (rows, checksum) == (len(expected), functools.reduce(operator.xor, map(hash, expected)))
    assert peak < whole.size / 3, "held more than a few of the smaller buckets at once"
    assert os.listdir(tmp_path / "spill") == [os.path.basename(whole.path)], "the split files are removed"


def test_a_spill_file_cut_short_fails_instead_of_losing_rows(tmp_path):
    paths = [write_csv(tmp_path / "a.csv", 100)]
    report, _ = spill(paths, str(tmp_path / "spill"), buckets=1)
    ((_, spill_file),) = report.files
    with open(spill_file.path, "r+b") as f:
        f.truncate(spill_file.size - 3)
    with pytest.raises(OSError, match="shorter than"):
        list(permuted_rows([spill_file], SPLITS, random.Random()))


def test_buckets_are_sized_for_the_input_within_the_open_files():
    assert bucket_count(0) == 1
    assert bucket_count(10 << 20) == 1
    assert bucket_count(1 << 30) == 64
    assert bucket_count(10**15) == 256
