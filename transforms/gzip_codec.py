"""Beam's GZIP through ISA-L: standard gzip for a fraction of the CPU on image payloads.

Beam's CompressedFile (behind WriteToTFRecord and every compressed read) deflates with the stdlib
zlib. Image payloads are already compressed, so deflate only frames them, yet zlib costs more per
photo than reading, checking and encoding it together. ISA-L's igzip (python-isal's `isal_zlib`,
a drop-in zlib API) writes gzip of the same size for a fraction of the CPU (`python
scripts/benchmark.py` prints both costs).

Beam has no setting for its codec, so importing this module points Beam's filesystem module at
`isal_zlib` instead of `zlib`. Beam re-imports every `BeamPlugin` subclass's module when a worker
starts (Dataflow passes them in --beam_plugins), so `IsalGzip` carries the swap to remote workers;
local runners share this process.
"""

from __future__ import annotations

import logging
import zlib

from apache_beam.io import filesystem as beam_filesystem
from apache_beam.utils.plugin import BeamPlugin
from isal import isal_zlib

_LOG = logging.getLogger(__name__)


class IsalGzip(BeamPlugin):
    """Marker: makes Dataflow import this module on every worker before it runs any bundle."""


def use_isal_gzip() -> None:
    """Points Beam's CompressedFile at isal_zlib. Should a Beam upgrade stop compressing through a
    module-level `zlib`, Beam keeps its own codec (correct, only slower) and a warning says so."""
    current = getattr(beam_filesystem, "zlib", None)
    if current is zlib:
        beam_filesystem.zlib = isal_zlib
    elif current is not isal_zlib:
        _LOG.warning("apache_beam.io.filesystem no longer compresses through zlib: GZIP stays on Beam's own codec")


use_isal_gzip()
