"""transforms.convert_pool against the real thing: converting processes give exactly what converting
in-process gives, their records appended to shared parts read back in TensorFlow, and a process
killed mid-conversion costs that one source, nothing else."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from core.contract.features import DEFAULT_IMAGE_KEYS
from core.contract.layout import GZIP, SHARD_PARTS_FOLDER, UNCOMPRESSED
from tests import broken_images as bi
from tests.transforms.test_image_check import BROKEN, MAX_PIXELS, VARIANTS
from transforms import convert_pool
from transforms.convert_pool import CRASHED, ConvertPool, ProcessFailed
from transforms.image_check import Encoding
from transforms.image_convert import ImageConverter, ImageSettings
from transforms.outcomes import DeadLetter, Record, Source, Written
from transforms.shard_parts import ShardLayout, SharedParts

LABELS = ("a", "b")


def _settings(compression=UNCOMPRESSED, **kwargs) -> ImageSettings:
    return ImageSettings(
        LABELS, dict(DEFAULT_IMAGE_KEYS), kwargs.pop("max_pixels", MAX_PIXELS), compression=compression, **kwargs
    )


def _sources(folder, files: dict[str, bytes]) -> list[Source]:
    sources = []
    for i, (name, data) in enumerate(sorted(files.items())):
        path = folder / name
        path.write_bytes(data)
        sources.append(Source(str(path), name, LABELS[i % 2], "train"))
    return sources


def _flat_bmp(width: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, 40), (200, 80, 10)).save(buffer, "BMP")
    return buffer.getvalue()


def _noise_jpeg(side: int) -> bytes:
    """A JPEG that takes a while to check (noise does not compress)."""
    pixels = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory):
    """Every variant and every kind of broken input of the image-check tests, as files."""
    files = {f"{name}.img": VARIANTS[name].make() for name in VARIANTS}
    files |= {f"broken-{name}.img": make() for name, (make, _, _) in BROKEN.items()}
    return _sources(tmp_path_factory.mktemp("sources"), files)


def test_a_pool_takes_the_processes_started_ahead_and_the_unused_ones_end(every_kind):
    with convert_pool.started_ahead(3):
        ahead = [worker.process for worker in convert_pool._STARTED_AHEAD]
        pool = ConvertPool(2, _settings())
        try:
            taken = {worker.process.pid for worker in pool._workers}
            pool.submit([(source, None) for source in every_kind])
            outcomes = list(pool.results())
        finally:
            pool.shutdown()
    assert taken < {process.pid for process in ahead}  # no process of its own
    assert sum(isinstance(o, Record) for o, _ in outcomes) == len(VARIANTS)
    assert convert_pool._STARTED_AHEAD == []
    assert all(process.returncode is not None for process in ahead)


def test_converting_processes_give_what_converting_in_process_gives(every_kind):
    settings = _settings()
    pool = ConvertPool(2, settings)
    try:
        pool.submit([(source, None) for source in every_kind])
        in_pool = list(pool.results())
    finally:
        pool.shutdown()
    in_process = [ImageConverter(settings).convert(source) for source in every_kind]
    assert sorted(in_pool, key=repr) == sorted(in_process, key=repr)
    assert sum(isinstance(o, Record) for o, _ in in_pool) == len(VARIANTS)
    assert sum(isinstance(o, DeadLetter) for o, _ in in_pool) == len(BROKEN)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """JPEGs of noise, which deflate would not shrink: appended to shared parts as stored pieces."""
    files = {f"{i:02d}.jpg": _noise_jpeg(200 + i) for i in range(12)}
    return _sources(tmp_path_factory.mktemp("photos"), files)


def _convert_into(layout: ShardLayout, settings: ImageSettings, sources: list[Source]):
    """The sources converted by 2 processes, given the layout's shared parts: (the parts as
    closed, the outcomes)."""
    parts, pool = SharedParts(layout), ConvertPool(2, settings)
    try:
        pool.submit([(source, parts.assign(source.split)) for source in sources])
        outcomes = [outcome for outcome, _ in pool.results()]
        pool.release_parts()
    finally:
        pool.shutdown()
    for outcome in outcomes:
        if isinstance(outcome, Written):
            parts.add(outcome)
    return parts.close(), outcomes


@pytest.mark.parametrize("compression", [GZIP, UNCOMPRESSED])
def test_records_appended_by_several_processes_read_back_whole(tmp_path, photos, compression):
    layout, settings = ShardLayout(str(tmp_path / "out"), {"train": 3}, compression), _settings(compression)
    (tmp_path / "out").mkdir()
    closed, outcomes = _convert_into(layout, settings, photos)

    expected = sorted(ImageConverter(settings).convert(s)[0].data for s in photos)
    tf_compression = "GZIP" if compression == GZIP else ""
    read = [
        r for p in closed for r in tf.data.TFRecordDataset(p.path, compression_type=tf_compression).as_numpy_iterator()
    ]
    assert sorted(read) == expected
    assert all(isinstance(o, Written) for o in outcomes)
    assert sum(p.records for p in closed) == len(expected) and {p.index for p in closed} == {0, 1, 2}


def test_records_worth_deflating_come_back_whole_for_the_bundle_to_write(tmp_path):
    """Flat BMPs, stored as they are (TensorFlow decodes them): their pixels deflate well."""
    drawings = _sources(tmp_path, {f"{i:02d}.bmp": _flat_bmp(60 + i) for i in range(12)})
    settings = _settings(GZIP)
    (tmp_path / "out").mkdir()
    closed, outcomes = _convert_into(ShardLayout(str(tmp_path / "out"), {"train": 3}, GZIP), settings, drawings)
    in_process = [ImageConverter(settings).convert(source)[0] for source in drawings]
    assert all(isinstance(o, Record) for o in in_process)
    assert sorted(outcomes, key=repr) == sorted(in_process, key=repr)  # Records, not Written
    assert closed == [] and not list((tmp_path / "out" / SHARD_PARTS_FOLDER).iterdir())


def test_a_process_killed_mid_conversion_costs_only_that_source(tmp_path):
    first, slow, queued = _sources(
        tmp_path,
        {"0-first.jpg": _noise_jpeg(300), "1-slow.jpg": _noise_jpeg(4000), "2-queued.jpg": _noise_jpeg(200)},
    )
    layout = ShardLayout(str(tmp_path / "out"), {"train": 1}, GZIP)
    (tmp_path / "out").mkdir()
    parts, pool = SharedParts(layout), ConvertPool(1, _settings(GZIP))
    try:
        worker = pool._workers[0]
        pool.submit([(source, parts.assign("train")) for source in (first, slow, queued)])
        results = pool.results()
        outcomes = [next(results)]  # the first one's: the process is now converting the slow one
        os.kill(worker.process.pid, signal.SIGKILL)
        outcomes += list(results)
        assert pool._workers[0] is not worker and pool._workers[0].process.poll() is None
        pool.release_parts()
    finally:
        pool.shutdown()
    assert worker.process.returncode == -signal.SIGKILL
    assert outcomes[1] == (DeadLetter(slow.uri, "decode", CRASHED), 0)
    assert [type(o) for o, _ in outcomes] == [Written, DeadLetter, Written]
    for outcome, _ in outcomes:
        if isinstance(outcome, Written):
            parts.add(outcome)
    (part,) = parts.close()  # what the killed process appended is whole
    read = list(tf.data.TFRecordDataset(part.path, compression_type="GZIP").as_numpy_iterator())
    filenames = sorted(
        tf.train.Example.FromString(r).features.feature["image/filename"].bytes_list.value[0] for r in read
    )
    assert filenames == [first.uri.encode(), queued.uri.encode()] and part.records == 2


def test_sources_queued_behind_a_slow_one_go_to_the_process_that_is_free(tmp_path):
    """Each process is sent a few sources at a time as it answers, so one stuck on a slow source
    holds back only those sent ahead to it, not a share of everything submitted."""
    files = {"00-slow.jpg": _noise_jpeg(4000)} | {f"{i:02d}.bmp": _flat_bmp(40) for i in range(1, 61)}
    sources = _sources(tmp_path, files)
    pool = ConvertPool(2, _settings(max_pixels=20_000_000))
    try:
        while not all(worker.ready for worker in pool._workers):  # both started: neither is late
            for answered, _ in pool._answers.select():
                list(pool._receive(answered.data))
        pool.submit([(source, None) for source in sources])
        outcomes = [outcome for outcome, _ in pool.results()]
    finally:
        pool.shutdown()
    assert len(outcomes) == len(sources) and all(isinstance(o, Record) for o in outcomes)
    (slow_at,) = [i for i, outcome in enumerate(outcomes) if b"00-slow.jpg" in outcome.data]
    assert len(outcomes) - 1 - slow_at < ConvertPool.SENT_AHEAD  # a share would have been 30


def test_a_conversion_error_is_raised_as_in_process(tmp_path):
    (source,) = _sources(tmp_path, {"a.png": bi.image_bytes("PNG", "RGB")})
    pool = ConvertPool(1, _settings(max_pixels=10**12))
    try:
        pool.submit([(source, None)])
        with pytest.raises(ValueError, match="max_pixels="):
            list(pool.results())
    finally:
        pool.shutdown()


def test_a_process_that_cannot_start_fails_the_pool_not_a_source(tmp_path, monkeypatch):
    (source,) = _sources(tmp_path, {"a.png": bi.image_bytes("PNG", "RGB")})
    monkeypatch.setattr(convert_pool.sys, "executable", "/bin/false")
    pool = ConvertPool(1, _settings())
    try:
        pool.submit([(source, None)])
        with pytest.raises(ProcessFailed, match="before it started"):
            list(pool.results())
    finally:
        pool.shutdown()


def test_shutdown_ends_every_process(tmp_path):
    pool = ConvertPool(2, _settings(encoding=Encoding(jpeg_only=True)))
    processes = [worker.process for worker in pool._workers]
    pool.submit([(s, None) for s in _sources(tmp_path, {"a.png": bi.image_bytes("PNG", "RGB")})])
    ((outcome, _),) = pool.results()
    assert outcome.converted  # the settings reached the process
    pool.shutdown()
    assert [process.returncode for process in processes] == [0, 0]


def test_processes_must_be_positive():
    with pytest.raises(ValueError, match="processes"):
        ConvertPool(0, _settings())


def test_a_converting_process_imports_no_beam():
    """It runs image_convert and what that imports: Beam would cost each process about a second
    and 150 MB (remote sources load it when one is read)."""
    script = (
        "import sys, transforms.convert_pool, transforms.image_convert;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('apache_beam', 'tensorflow')))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
