"""scripts/bench_random_access.py on a corpus of a few hundred small records: every format returns
the records written, the same ones for the same random indices; a reader that returned another
record stops the benchmark; and the table's figures of shuffle quality say what they claim."""

import random
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_random_access as bench  # noqa: E402  (a script module, found through the line above)

RECORDS = 200
SHARD_MB = 0.17  # about 40 records of about 4 kB per shard: 5 shards
FORMATS = (bench.AR_1, bench.AR_GROUPED, bench.TFRECORD, bench.GZIP)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(corpus, the records it holds, in order)."""
    folder = tmp_path_factory.mktemp("random_access")
    corpus = bench.write_corpus(str(folder), RECORDS, bench.payloads(None, 4), SHARD_MB, group_size=8)
    payload = bench.payloads(None, 4)  # the same seed: the same payloads, in the same order
    return corpus, [bench.example(i, payload(i)) for i in range(RECORDS)]


def test_the_corpus_is_sharded_alike_in_every_format(written):
    corpus, records = written
    assert corpus.shards == 5 and sum(corpus.shard_lengths()) == RECORDS  # from their mean size
    for fmt in FORMATS:
        assert len(corpus.paths(fmt)) == corpus.shards
        assert bench.sequential(corpus, fmt) == (RECORDS, sum(map(len, records))), fmt


def test_every_format_returns_the_same_records_for_the_same_random_indices(written):
    corpus, records = written
    rng = random.Random(7)
    indices = [rng.randrange(RECORDS) for _ in range(50)]
    for fmt in FORMATS:
        assert list(bench.random_reads(corpus, fmt, indices)) == [records[i] for i in indices], fmt


def test_a_reader_that_returns_another_record_stops_the_benchmark(written):
    corpus, records = written
    indices = [3, 50, 199]
    corpus.check(bench.TFRECORD, indices, [records[i] for i in indices])
    with pytest.raises(bench.WrongRecords, match="at indices \\[50\\]"):
        corpus.check(bench.TFRECORD, indices, [records[3], records[51], records[199]])
    with pytest.raises(bench.WrongRecords, match="2 records read for 3"):
        corpus.check(bench.TFRECORD, indices, [records[3], records[50]])


def test_the_shuffle_figures_tell_an_order_kept_from_a_shuffled_one(written):
    corpus, _ = written
    kept, reversed_order = list(range(RECORDS)), list(reversed(range(RECORDS)))
    assert bench.rank_correlation(kept, kept) == pytest.approx(1)
    assert bench.rank_correlation(kept, reversed_order) == pytest.approx(-1)
    assert bench.neighbours_apart(corpus, kept) == 1
    shuffled = bench.global_order(RECORDS, 2, seed=0)
    assert sorted(shuffled[0]) == kept and shuffled[0] != shuffled[1]
    assert bench.neighbours_apart(corpus, shuffled[0]) > RECORDS / 6  # a uniform shuffle: ~0.29x


def test_a_run_measures_every_row_and_the_streamed_shuffle_stays_local(written):
    corpus, _ = written
    runs = [bench.measure_run(corpus, run, random_count=30, slow_count=3, shuffle_buffer=2) for run in range(2)]
    rows = bench.table_rows(corpus, runs, shuffle_buffer=2)
    assert [row[0].split(",")[0] for row in rows] == [
        "ArrayRecord",
        "ArrayRecord",
        "TFRecord + `.idx`",
        "TFRecord",
        "GZIP TFRecord",
        "GZIP TFRecord",
    ]
    assert all(len(row) == len(bench.HEADINGS) for row in rows)
    for run in runs:
        # The trainer's reader moves a record only about as far as its buffer and interleave allow.
        assert run[f"{bench.TFRECORD}_streamed", "apart"] < run["global", "apart"] / 3
        assert run[bench.AR_1, "random_rate"] > 0 and run[bench.GZIP, "random_rate"] > 0
