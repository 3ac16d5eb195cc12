"""Beam's GZIP through ISA-L (transforms.gzip_codec): the swap happens wherever records are written
(in this process, and on a worker that imports the plugin), and the files stay plain gzip both ways."""

import gzip
import logging
import os
import pathlib
import subprocess
import sys

from apache_beam.io import filesystem as beam_filesystem
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils.plugin import BeamPlugin
from isal import isal_zlib

from transforms.gzip_codec import IsalGzip, use_isal_gzip

REPO = pathlib.Path(__file__).resolve().parents[2]
# Incompressible (like image payloads) and compressible parts, in uneven chunks.
PAYLOAD = os.urandom(300_000) + b"label,uri\n" * 40_000


def _read_all(path) -> bytes:
    with FileSystems.open(str(path), compression_type=CompressionTypes.GZIP) as f:
        return b"".join(iter(lambda: f.read(65_536), b""))


def _beam_codecs(*steps: str) -> list[str]:
    """The module Beam's filesystem compresses with, in a fresh interpreter, before and after `steps`."""
    show = "print(filesystem.zlib.__name__)\n"
    code = "from apache_beam.io import filesystem\n" + show + "".join(steps) + show
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    return result.stdout.split()


def test_the_module_that_writes_records_switches_beam_to_isal():
    assert _beam_codecs("import transforms.write\n") == ["zlib", "isal.isal_zlib"]


def test_what_beam_writes_is_standard_gzip(tmp_path):
    assert beam_filesystem.zlib is isal_zlib  # switched by importing transforms.gzip_codec
    path = tmp_path / "out.gz"
    with FileSystems.create(str(path), compression_type=CompressionTypes.GZIP) as f:
        for start in range(0, len(PAYLOAD), 70_001):
            f.write(PAYLOAD[start : start + 70_001])
    assert gzip.decompress(path.read_bytes()) == PAYLOAD
    assert len(path.read_bytes()) < len(PAYLOAD) - 350_000  # the text part was really compressed


def test_beam_reads_standard_gzip_including_concatenated_members(tmp_path):
    path = tmp_path / "in.csv.gz"
    path.write_bytes(gzip.compress(PAYLOAD[:123_456]) + gzip.compress(PAYLOAD[123_456:]))
    assert _read_all(path) == PAYLOAD


def test_a_worker_importing_the_plugin_gets_isal():
    """What a Dataflow worker does at start with the --beam_plugins the runner collected."""
    plugin = f"{IsalGzip.__module__}.{IsalGzip.__name__}"
    assert plugin in BeamPlugin.get_all_plugin_paths()  # what DataflowRunner puts in --beam_plugins
    steps = (
        "from apache_beam.runners.worker.sdk_worker_main import _import_beam_plugins\n",
        f"_import_beam_plugins([{plugin!r}])\n",
    )
    assert _beam_codecs(*steps) == ["zlib", "isal.isal_zlib"]


def test_an_unknown_beam_codec_is_left_alone_with_a_warning(monkeypatch, caplog):
    codec = object()
    monkeypatch.setattr(beam_filesystem, "zlib", codec)
    with caplog.at_level(logging.WARNING, logger="transforms.gzip_codec"):
        use_isal_gzip()
    assert beam_filesystem.zlib is codec
    assert "GZIP stays on Beam's own codec" in caplog.text
