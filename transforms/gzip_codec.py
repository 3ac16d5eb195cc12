"""Beam's GZIP through transforms.gzip_choice: stored blocks for payloads that do not compress,
ISA-L for those that do, instead of the stdlib zlib at its default level (the costs of each:
`python scripts/benchmark.py`). Reads inflate through ISA-L.

Beam has no setting for its codec, so importing this module points Beam's filesystem module at
`gzip_choice.CODEC` instead of `zlib`. Beam re-imports every `BeamPlugin` subclass's module when a
worker starts (Dataflow passes them in --beam_plugins), so `GzipCodecPlugin` carries the swap to
remote workers; local runners share this process.
"""

from __future__ import annotations

import logging
import zlib

from apache_beam.io import filesystem as beam_filesystem
from apache_beam.utils.plugin import BeamPlugin

from transforms.gzip_choice import CODEC

_LOG = logging.getLogger(__name__)


class GzipCodecPlugin(BeamPlugin):
    """Marker: makes Dataflow import this module on every worker before it runs any bundle."""


def use_gzip_codec() -> None:
    """Points Beam's CompressedFile at CODEC. Should a Beam upgrade stop compressing through a
    module-level `zlib`, Beam keeps its own codec (correct, only slower) and a warning says so."""
    current = getattr(beam_filesystem, "zlib", None)
    if current is zlib:
        beam_filesystem.zlib = CODEC
    elif current is not CODEC:
        _LOG.warning("apache_beam.io.filesystem no longer compresses through zlib: GZIP stays on Beam's own codec")


use_gzip_codec()
