"""WriteSplits on the DirectRunner: each record's payload lands in its split's shards, as planned,
and a record of a split the plan does not name fails the job instead of vanishing; the run's
summary counts records by their split, label and size."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from core.contract.layout import GZIP
from pipeline.tfrecord_reader import read_records
from transforms.counting import CountRecords, SummarizeOutcomes
from transforms.outcomes import DeadLetter, FirstFrame, OutcomeSummary, Record, Skipped
from transforms.write import WriteSplits

# Re-encoded: 4 (one frame), 7 and 9 (the first of several).
FIRST_FRAMES = {7: FirstFrame("src/b.tif", 3), 9: FirstFrame("src/a.webp", 12)}
RECORDS = [
    Record("train" if i % 3 else "validation", f"label{i % 2}", i in (4, 7, 9), b"payload-%d" % i, FIRST_FRAMES.get(i))
    for i in range(12)
]


def test_each_payload_goes_to_its_splits_planned_shards(tmp_path):
    shards = {"train": 3, "validation": 2}
    with beam.Pipeline() as p:
        _ = p | beam.Create(RECORDS) | WriteSplits(str(tmp_path), shards, GZIP)

    for split, count in shards.items():
        files = sorted(tmp_path.glob(f"{split}-*.tfrecord.gz"))
        assert [f.name for f in files] == [f"{split}-{i:05d}-of-{count:05d}.tfrecord.gz" for i in range(count)]
        held = sorted(payload for f in files for payload in read_records(str(f), inside=None))
        assert held == sorted(r.data for r in RECORDS if r.split == split)


def test_a_record_of_an_unplanned_split_fails_the_job(tmp_path):
    stray = Record("test", "label0", False, b"stray")
    with pytest.raises(Exception, match="split 'test', which the plan does not name"):
        with beam.Pipeline() as p:
            _ = p | beam.Create([*RECORDS, stray]) | WriteSplits(str(tmp_path), {"train": 1, "validation": 1}, GZIP)


def test_the_summary_counts_records_skips_and_dead_letters():
    others = [Skipped("a.txt", ".txt"), DeadLetter("b.jpg", "decode", "truncated")]
    expected = OutcomeSummary()
    for outcome in [*RECORDS, *others]:
        expected.add(outcome)
    assert expected.written == {"train": 8, "validation": 4}
    assert expected.bytes["validation"] == sum(len(r.data) for r in RECORDS if r.split == "validation")
    assert expected.labels["train"] == {"label0": 4, "label1": 4}
    assert (expected.converted, expected.skipped, expected.errors) == (3, {".txt": 1}, {"decode": 1})
    assert (expected.first_frames, expected.first_frame_example) == (2, FirstFrame("src/a.webp", 12))
    assert expected.warnings() == [
        "2 source(s) have more than one frame or page (animated GIF, WebP or PNG; multi-page TIFF) and were "
        "re-encoded: their records hold the first only, as tf.io.decode_image(expand_animations=False) reads one "
        "stored as it is (for example src/a.webp: 12 frames)"
    ]
    with beam.Pipeline() as p:
        # Records counted per bundle (three Creates: at least three summaries to merge), other outcomes one by one.
        counted = [
            p | f"Records{i}" >> beam.Create(part) | f"Count{i}" >> beam.ParDo(CountRecords())
            for i, part in enumerate((RECORDS[:5], RECORDS[5:8], RECORDS[8:]))
        ]
        summary = (
            (*counted, p | "Others" >> beam.Create(others)) | beam.Flatten() | beam.CombineGlobally(SummarizeOutcomes())
        )
        assert_that(summary, equal_to([expected]))
