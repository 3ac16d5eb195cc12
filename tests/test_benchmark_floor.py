"""The benchmark's floor (scripts/bench_variants.py) does the pipeline's per-image work: it counts
what the pipeline would write or refuse, and its GZIP streams, written to files, hold the
pipeline's TFRecords. Its runner-only variant runs the pipeline with none of that work. A pipeline
run's start-up is measured to its first image read."""

import gzip
import struct
import subprocess
import sys
from pathlib import Path

from PIL import Image

from core.contract.features import source_id
from core.contract.layout import GZIP
from core.contract.manifest import read_manifest
from core.tfrecord_framing import masked_crc32c
from pipeline.config import Config
from pipeline.tfrecord_reader import read_records
from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from transforms.example_proto import Example
from transforms.outcomes import Source

sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_measure  # noqa: E402  (script modules, found through the line above)
import bench_runs  # noqa: E402
import bench_variants  # noqa: E402

GOOD = {"cat/a.jpg": (40, 30), "cat/b.jpg": (20, 10), "dog/c.jpg": (16, 16)}


def _corpus(root: Path) -> list[tuple[str, str]]:
    """Three JPEGs in two classes and one broken file, as the benchmark lists them."""
    for key, size in GOOD.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, (200, 80, 10)).save(root / key, "JPEG")
    (root / "dog" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    return [(str(root / key), key.split("/")[0]) for key in sorted([*GOOD, "dog/broken.jpg"])]


def _records(stream: bytes) -> list[bytes]:
    """The payloads of an uncompressed TFRecord stream, checking its framing and CRCs."""
    payloads, offset = [], 0
    while offset < len(stream):
        length, length_crc = struct.unpack_from("<QI", stream, offset)
        assert length_crc == masked_crc32c(stream[offset : offset + 8])
        payload = stream[offset + 12 : offset + 12 + length]
        (payload_crc,) = struct.unpack_from("<I", stream, offset + 12 + length)
        assert payload_crc == masked_crc32c(payload)
        payloads.append(payload)
        offset += 16 + length
    return payloads


def test_floor_counts_images_and_errors_and_writes_its_records(tmp_path):
    corpus, dest = tmp_path / "corpus", tmp_path / "out"
    result = bench_variants.worker_floor(_corpus(corpus), str(corpus), str(dest))

    assert (result["records"], result["errors"]) == (len(GOOD), 1)
    assert result["processes"] >= 1 and result["work_s"] > 0
    files = sorted(dest.iterdir())
    assert sum(f.stat().st_size for f in files) == result["compressed_bytes"]
    written = [Example.FromString(bytes(r)).features.feature for f in files for r in read_records(str(f), inside=None)]
    assert sorted(f["image/filename"].bytes_list.value[0] for f in written) == [
        str(corpus / key).encode() for key in sorted(GOOD)
    ]


def test_floor_chunk_is_gzip_of_the_pipelines_records(tmp_path):
    items = _corpus(tmp_path)
    chunk = [Source(path, str(Path(path).relative_to(tmp_path)), label, "train") for path, label in items]
    keys = Config().image_keys
    dest = tmp_path / "floor-0" / "out"  # as the benchmark names a floor run's folder
    dest.mkdir(parents=True)

    tally = bench_variants.floor_chunk((7, chunk), bench_variants._floor_settings(items, GZIP), str(dest))

    written = sorted(dest.iterdir())  # these small flat JPEGs deflate well: one stream beside the pieces
    assert tally == {"records": len(GOOD), "errors": 1, "compressed_bytes": sum(f.stat().st_size for f in written)}
    streams = [gzip.decompress(f.read_bytes()) for f in written]
    examples = [Example.FromString(payload).features.feature for stream in streams for payload in _records(stream)]
    by_key = {features[keys["source_id"]].bytes_list.value[0]: features for features in examples}
    assert sorted(by_key) == sorted(source_id(key).encode() for key in GOOD)
    for key in sorted(GOOD):
        features = by_key[source_id(key).encode()]
        assert features[keys["filename"]].bytes_list.value == [str(tmp_path / key).encode()]
        assert features[keys["text"]].bytes_list.value == [key.split("/")[0].encode()]
        assert features[keys["label"]].int64_list.value == [int(key.startswith("dog"))]
        assert features[keys["format"]].bytes_list.value == [b"jpeg"]
        width, height = GOOD[key]
        assert features[keys["height"]].int64_list.value == [height]
        assert features[keys["width"]].int64_list.value == [width]
        assert features[keys["channels"]].int64_list.value == [3]
        assert features[keys["encoded"]].bytes_list.value == [(tmp_path / key).read_bytes()]


def test_runner_only_writes_the_first_images_example_for_every_source(tmp_path):
    """runner_1core: the pipeline's own run (manifest, read-back) with no per-image work."""
    corpus, dest = tmp_path / "corpus", tmp_path / "out"
    items = _corpus(corpus)
    script = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"
    worker = ["--worker", "runner_1core", "--corpus", str(corpus), "--dest", str(dest), "--extensions", ".jpg"]
    done = subprocess.run(
        [sys.executable, str(script), *worker], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-2000:]

    manifest = read_manifest(str(dest), lambda p: Path(p).read_text() if Path(p).exists() else None)
    records = [
        r
        for split in manifest.splits.values()
        for shard in split.shards
        for r in read_records(f"{dest}/{shard}", inside=None)
    ]
    assert len(records) == len(items)  # the broken file too: nothing is checked
    first = Example.FromString(records[0]).features.feature
    assert first["image/filename"].bytes_list.value == [items[0][0].encode()]
    assert {bytes(r) for r in records} == {bytes(records[0])}


def test_a_pipeline_runs_start_up_ends_when_it_reads_its_first_image(tmp_path):
    corpus, logs = tmp_path / "corpus", tmp_path / "logs"
    items = _corpus(corpus)
    logs.mkdir()
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "pipeline",
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--max_error_fraction",
        "0.5",
    ]
    measured = bench_measure.run_measured(command, str(logs), timeout=SUBPROCESS_TIMEOUT)
    assert measured["rc"] == 0, bench_measure.tail(measured["stderr_path"])

    assert 0 < measured["first_read_s"] < measured["wall_s"]
    record = bench_runs.run_record(1, measured, {"files": len(items), "mb": 0.01})
    assert record["startup_s"] == measured["first_read_s"] and record["work_s"] > 0
