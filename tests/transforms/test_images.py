"""ReadImages on the DirectRunner: a batch of sources becomes one record or one dead letter per
source, converted on the DoFn's thread pool, with the counters counted on the bundle's thread."""

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from PIL import Image

from core.contract.features import DEFAULT_IMAGE_KEYS
from core.contract.layout import GZIP
from pipeline.tfrecord_reader import read_records
from tests import broken_images
from transforms import images, progress
from transforms.image_convert import ImageSettings
from transforms.images import ReadImages, ReadImagesIntoShards
from transforms.outcomes import DEAD_LETTERS, METRICS_NAMESPACE, Source
from transforms.shard_parts import SHARD_PARTS, FinalizeShards, ShardLayout

LABELS = ("cat", "dog")


@pytest.fixture()
def sources(tmp_path):
    """Ten good JPEGs of varied sizes, a truncated one, a missing one and one with an unplanned label."""
    good = {}
    for i in range(10):
        path = tmp_path / f"good{i}.jpg"
        path.write_bytes(broken_images.image_bytes("JPEG", "RGB", (20 + i, 10 + i)))
        good[str(path)] = (20 + i, 10 + i)
    (tmp_path / "truncated.jpg").write_bytes(broken_images.truncated_jpeg())
    (tmp_path / "bird.jpg").write_bytes(broken_images.image_bytes("JPEG", "RGB", (8, 8)))
    bad = {
        str(tmp_path / "truncated.jpg"): "decode",
        str(tmp_path / "missing.jpg"): "read",
        str(tmp_path / "bird.jpg"): "label",
    }
    listed = [
        Source(uri, uri, "bird" if uri.endswith("bird.jpg") else LABELS[n % 2], "train")
        for n, uri in enumerate([*good, *bad])
    ]
    return listed, good, bad


SETTINGS = ImageSettings(LABELS, dict(DEFAULT_IMAGE_KEYS), 1_000_000)


def _run(listed, batch_size, threads, processes=0, total=None):
    p = TestPipeline()
    read = ReadImages(SETTINGS, threads, processes=processes, total=total)
    out = (
        p
        | beam.Create([listed[i : i + batch_size] for i in range(0, len(listed), batch_size)])
        | beam.ParDo(read).with_outputs(DEAD_LETTERS, main="records")
    )
    return p, out


@pytest.mark.parametrize("batch_size,threads,processes", [(1, 1, 0), (4, 3, 0), (13, 8, 0), (4, 1, 2)])
def test_one_outcome_per_source(sources, batch_size, threads, processes):
    listed, good, bad = sources
    labels = {s.uri: s.label for s in listed}
    p, out = _run(listed, batch_size, threads, processes)

    def check_records(records):
        seen = {}
        for record in records:
            feature = tf.train.Example.FromString(record.data).features.feature
            uri = feature["image/filename"].bytes_list.value[0].decode()
            seen[uri] = (feature["image/width"].int64_list.value[0], feature["image/height"].int64_list.value[0])
            assert (
                feature["image/class/label"].int64_list.value[0]
                == LABELS.index(labels[uri])
                == LABELS.index(record.label)
            )
        assert seen == good

    assert_that(out.records, check_records, label="records")
    assert_that(
        out[DEAD_LETTERS] | beam.Map(lambda d: (d.source, d.stage)), equal_to(list(bad.items())), label="dead letters"
    )
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]
    }
    good_bytes = sum(len(broken_images.image_bytes("JPEG", "RGB", size)) for size in good.values())
    assert counters["written"] == len(good) and counters["errors"] == len(bad)
    # bytes of every file read: the good ones and the truncated one (missing and bird are not read)
    assert counters["bytes_read"] == good_bytes + len(broken_images.truncated_jpeg())


def test_threads_must_be_positive():
    with pytest.raises(ValueError, match="threads"):
        ReadImages(SETTINGS, threads=0)


def test_processes_must_not_be_negative():
    with pytest.raises(ValueError, match="processes"):
        ReadImages(SETTINGS, threads=1, processes=-1)


@pytest.mark.parametrize("shared", [True, False])
def test_records_go_into_their_shards_whether_processes_may_share_parts_or_not(sources, tmp_path, monkeypatch, shared):
    """Converting processes append to shared local parts, or, on a file system where appends from
    several processes may not land whole (NFS), hand their records back for the bundle to write.
    The good images are noise, which deflate would not shrink (so they may be appended)."""
    monkeypatch.setattr(images, "processes_may_append", lambda path: shared)
    listed, _, bad = sources
    rng = np.random.default_rng(0)
    good = []
    for i in range(8):
        path = tmp_path / f"noise{i}.jpg"
        Image.fromarray(rng.integers(0, 256, (100, 120 + i, 3), dtype=np.uint8)).save(path)
        good.append(str(path))
    listed = [Source(uri, uri, LABELS[n % 2], "train") for n, uri in enumerate(good)] + [
        s for s in listed if s.uri in bad
    ]
    layout = ShardLayout(str(tmp_path / "out"), {"train": 2}, GZIP)
    (tmp_path / "out").mkdir()
    with TestPipeline() as p:
        read = (
            p
            | beam.Create([listed])
            | beam.ParDo(ReadImagesIntoShards(layout, SETTINGS, 1, processes=2)).with_outputs(
                DEAD_LETTERS, SHARD_PARTS, main="summaries"
            )
        )
        _ = read[SHARD_PARTS] | FinalizeShards(layout)
        assert_that(read[DEAD_LETTERS] | beam.Map(lambda d: d.source), equal_to(list(bad)), label="dead letters")
    records = [r for i in range(2) for r in read_records(layout.shard_path("train", i), GZIP, inside=None)]
    filenames = {tf.train.Example.FromString(r).features.feature["image/filename"].bytes_list.value[0] for r in records}
    assert filenames == {uri.encode() for uri in good}


@pytest.mark.parametrize("planned", [True, False])
def test_every_outcome_counts_into_the_converting_phase(sources, caplog, planned):
    """Records and dead letters alike. A phase whose total the plan knows ends with its last source,
    in a line (the benchmark takes the end of a local run's reading from it); one whose total is
    unknown ends when the next phase starts (transforms.progress)."""
    listed = sources[0]
    p, _ = _run(listed, len(listed), 1, total=len(listed) if planned else None)
    with caplog.at_level("INFO", logger=progress.__name__):
        p.run().wait_until_finish()
    ends = [r.getMessage() for r in caplog.records if r.getMessage().startswith("converting done: ")]
    assert [end.startswith(f"converting done: {len(listed)} sources in ") for end in ends] == (
        [True] if planned else []
    )
