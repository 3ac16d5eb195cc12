"""Beam's GZIP codec (transforms.gzip_codec, transforms.gzip_choice): the swap happens wherever
records are written (in this process, and on a worker that imports the plugin); a stream that does
not compress is written as stored blocks, one that does through ISA-L; the files stay plain gzip
for Python, Beam and TensorFlow alike."""

import gzip
import logging
import os
import pathlib
import subprocess
import sys

import apache_beam as beam
import pytest
import tensorflow as tf
from apache_beam.io import filesystem as beam_filesystem
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils.plugin import BeamPlugin

from tests.subprocess_limits import SUBPROCESS_TIMEOUT
from transforms.gzip_choice import CODEC, SAMPLE_BYTES, ChoosingCompressor, worth_compressing
from transforms.gzip_codec import GzipCodecPlugin, use_gzip_codec

REPO = pathlib.Path(__file__).resolve().parents[2]
# Incompressible (like image payloads) and compressible parts, in uneven chunks.
PAYLOAD = os.urandom(300_000) + b"label,uri\n" * 40_000
NOISE = os.urandom(3 * SAMPLE_BYTES)  # like JPEG bytes: nothing to gain from deflate
TEXT = b"".join(b"%d,gs://bucket/images/cat/%07d.jpg\n" % (i % 7, i) for i in range(100_000))
STORED_BLOCK, GZIP_HEADER_BYTES = 0, 10  # deflate's BTYPE 00; zlib's and ISA-L's minimal gzip header


def _read_all(path) -> bytes:
    with FileSystems.open(str(path), compression_type=CompressionTypes.GZIP) as f:
        return b"".join(iter(lambda: f.read(65_536), b""))


def _write_with_beam(path, data: bytes, chunk: int = 70_001) -> bytes:
    with FileSystems.create(str(path), compression_type=CompressionTypes.GZIP) as f:
        for start in range(0, len(data), chunk):
            f.write(data[start : start + chunk])
    return path.read_bytes()


def _first_block_type(gz: bytes) -> int:
    """BTYPE of the first deflate block of a gzip file without optional header fields."""
    assert gz[:2] == b"\x1f\x8b" and gz[3] == 0  # gzip magic, no FLG fields
    return (gz[GZIP_HEADER_BYTES] >> 1) & 0b11


def _beam_codecs(*steps: str) -> list[str]:
    """The codec Beam's filesystem compresses with, in a fresh interpreter, before and after `steps`."""
    show = "print(filesystem.zlib.__name__)\n"
    code = "from apache_beam.io import filesystem\n" + show + "".join(steps) + show
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, check=True
    )
    return result.stdout.split()


def test_the_module_that_writes_records_switches_beam_to_the_codec():
    assert _beam_codecs("import transforms.write\n") == ["zlib", "transforms.gzip_choice.CODEC"]


def test_a_worker_importing_the_plugin_gets_the_codec():
    """What a Dataflow worker does at start with the --beam_plugins the runner collected."""
    plugin = f"{GzipCodecPlugin.__module__}.{GzipCodecPlugin.__name__}"
    assert plugin in BeamPlugin.get_all_plugin_paths()  # what DataflowRunner puts in --beam_plugins
    steps = (
        "from apache_beam.runners.worker.sdk_worker_main import _import_beam_plugins\n",
        f"_import_beam_plugins([{plugin!r}])\n",
    )
    assert _beam_codecs(*steps) == ["zlib", "transforms.gzip_choice.CODEC"]


def test_worth_compressing_tells_noise_from_text():
    assert not worth_compressing(NOISE[:SAMPLE_BYTES])
    assert worth_compressing(TEXT[:SAMPLE_BYTES])


def test_incompressible_data_is_written_as_stored_blocks(tmp_path):
    assert beam_filesystem.zlib is CODEC  # switched by importing transforms.gzip_codec
    gz = _write_with_beam(tmp_path / "noise.gz", NOISE)
    assert gzip.decompress(gz) == NOISE
    assert _first_block_type(gz) == STORED_BLOCK
    assert len(NOISE) < len(gz) < len(NOISE) * 1.001  # 5 bytes per 64 kB block, header and trailer


def test_compressible_data_is_deflated(tmp_path):
    gz = _write_with_beam(tmp_path / "text.gz", TEXT)
    assert gzip.decompress(gz) == TEXT
    assert _first_block_type(gz) != STORED_BLOCK
    assert len(gz) < len(TEXT) / 3


def test_a_short_stream_is_chosen_for_when_it_ends(tmp_path):
    """Under SAMPLE_BYTES in all: the whole stream is the sample (mostly text here: compressed)."""
    gz = _write_with_beam(tmp_path / "mixed.gz", PAYLOAD)
    assert gzip.decompress(gz) == PAYLOAD
    assert len(gz) < len(PAYLOAD) - 350_000  # the text part was really compressed


@pytest.mark.parametrize("chunk", [1, 65_536, SAMPLE_BYTES - 1, SAMPLE_BYTES, 3 * SAMPLE_BYTES])
def test_writes_round_trip_whatever_their_size_against_the_sample(chunk):
    data = NOISE[: 2 * SAMPLE_BYTES] + TEXT if chunk > 1 else NOISE[:5000]
    compressor = ChoosingCompressor(CODEC.Z_DEFAULT_COMPRESSION, CODEC.DEFLATED, CODEC.MAX_WBITS | 16)
    out = [compressor.compress(data[start : start + chunk]) for start in range(0, len(data), chunk)]
    assert gzip.decompress(b"".join(out) + compressor.flush()) == data
    assert compressor.stored  # chosen on the first SAMPLE_BYTES, all noise


def test_an_empty_stream_is_valid_gzip(tmp_path):
    assert gzip.decompress(_write_with_beam(tmp_path / "empty.gz", b"")) == b""


def test_beam_reads_standard_gzip_including_concatenated_members(tmp_path):
    path = tmp_path / "in.csv.gz"
    path.write_bytes(gzip.compress(PAYLOAD[:123_456]) + gzip.compress(PAYLOAD[123_456:]))
    assert _read_all(path) == PAYLOAD


def test_tensorflow_reads_stored_tfrecords_written_by_beam(tmp_path):
    records = [os.urandom(100_000 + i) for i in range(30)]  # 3 MB of photo-like payloads
    with beam.Pipeline() as p:
        _ = (
            p
            | beam.Create(records)
            | beam.io.WriteToTFRecord(
                str(tmp_path / "shard"), num_shards=1, compression_type=CompressionTypes.GZIP, file_name_suffix=".gz"
            )
        )
    (path,) = tmp_path.glob("shard*.gz")
    assert _first_block_type(path.read_bytes()) == STORED_BLOCK
    read = [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type="GZIP")]
    assert sorted(read) == sorted(records)


def test_an_unknown_beam_codec_is_left_alone_with_a_warning(monkeypatch, caplog):
    codec = object()
    monkeypatch.setattr(beam_filesystem, "zlib", codec)
    with caplog.at_level(logging.WARNING, logger="transforms.gzip_codec"):
        use_gzip_codec()
    assert beam_filesystem.zlib is codec
    assert "GZIP stays on Beam's own codec" in caplog.text
