"""One image source into its record or its dead letter: read the file, check it, build its Example,
and, when given a shard part, append the record there.

The same conversion runs on ReadImages' threads and in the converting processes of a local run
(transforms.convert_pool), so there is no Beam here, and remote sources load core.storage
(Beam's file systems) only when one is read.
"""

from __future__ import annotations

import dataclasses
import io
from typing import BinaryIO

from core.contract.layout import UNCOMPRESSED, is_remote
from core.local_files import open_regular
from transforms.example_proto import MAX_EXAMPLE_BYTES, encode_example, image_facts, image_features
from transforms.image_check import BadImage, Encoding, check_image
from transforms.outcomes import DeadLetter, FirstFrame, Record, Source, Written
from transforms.part_appender import PartAppender
from transforms.same_content import content_digest

# Sources longer than this are not read (config image.max_file_mib). The default is above any image
# within the default max_pixels (an uncompressed 16-bit RGBA TIFF of 89 Mpixels: 683 MiB); the most
# leaves 1 MiB for the rest of the Example (keys, path, label) within what TensorFlow parses.
DEFAULT_MAX_FILE_MIB = 1024
MAX_FILE_MIB = (MAX_EXAMPLE_BYTES >> 20) - 1


class SourceTooLarge(Exception):
    """A source file longer than the run reads (`ImageSettings.max_file_bytes`)."""


def read_source(uri: str, max_bytes: int) -> bytes:
    """A source file's bytes: local files directly (regular files only, else NotARegularFile:
    core.local_files), anything else through Beam's file systems. SourceTooLarge, before any
    byte is read, when the file is longer than max_bytes (its size is known once it is open: from
    the file system, or from the object's metadata, which Beam fetches to open it)."""
    with _open_source(uri) as f:
        size = f.seek(0, io.SEEK_END)
        if size > max_bytes:
            raise SourceTooLarge(f"{size:,} bytes; the limit is {max_bytes:,} (image.max_file_mib)")
        f.seek(0)
        return f.read()


def _open_source(uri: str) -> BinaryIO:
    if is_remote(uri):
        from core import storage  # Beam: only for remote sources (module docstring)

        return storage.open_binary(uri, inside=None)
    return open_regular(uri, inside=None)


@dataclasses.dataclass(frozen=True)
class ImageSettings:
    """What every conversion of a run shares. `label_offset` is added to every label id (1 for
    ImageNet-style readers, whose labels are 1-based); `encoding` says how images not stored byte
    for byte are encoded (jpeg_only); `compression` is that of the shard parts records are
    appended to (GZIP or NONE; records given no part, or worth deflating, are returned whole).
    `max_file_bytes`: longer sources are dead letters, unread; it bounds each read's memory, and
    keeps every Example one TensorFlow parses, sources stored byte for byte included
    (re-encodings stay far below it: max_pixels)."""

    label_map: tuple[str, ...]
    keys: dict[str, str]
    max_pixels: int
    label_offset: int = 0
    encoding: Encoding = Encoding()
    compression: str = UNCOMPRESSED
    max_file_bytes: int = DEFAULT_MAX_FILE_MIB << 20

    def __post_init__(self):
        if self.label_offset < 0:
            raise ValueError("label_offset must be >= 0")
        if not 0 < self.max_file_bytes <= MAX_FILE_MIB << 20:
            raise ValueError(f"max_file_bytes={self.max_file_bytes:,} is not in 1..{MAX_FILE_MIB << 20:,}")


class ImageConverter:
    """`convert(source, part)`: (outcome, bytes read) for one source; thread-safe."""

    def __init__(self, settings: ImageSettings):
        self._settings = settings
        self._label_ids = {label: i for i, label in enumerate(settings.label_map)}
        self._appender = PartAppender(settings.compression)

    def convert(self, source: Source, part: str | None = None) -> tuple[Record | Written | DeadLetter, int]:
        """The record (appended to `part` when one is given and it is not worth deflating:
        transforms.part_appender; then a Written) or the dead letter naming the file and why, and
        the bytes read."""
        outcome, bytes_read = self._record(source)
        if part is None or isinstance(outcome, DeadLetter):
            return outcome, bytes_read
        piece = self._appender.append(part, outcome.data)
        if piece is None:
            return outcome, bytes_read
        written = Written(
            outcome.split,
            outcome.label,
            outcome.converted,
            len(outcome.data),
            part,
            piece,
            outcome.first_frame,
            outcome.source,
            outcome.digest,
            outcome.orientation,
            outcome.facts,
        )
        return written, bytes_read

    def _record(self, source: Source) -> tuple[Record | DeadLetter, int]:
        s = self._settings
        label_id = self._label_ids.get(source.label)
        if label_id is None:
            return DeadLetter(
                source.uri, "label", f"label {source.label!r} is not in the label map (source added after planning?)"
            ), 0
        try:
            data = read_source(source.uri, s.max_file_bytes)
        except SourceTooLarge as e:
            return DeadLetter(source.uri, "read", f"too large: {e}"), 0
        except Exception as e:  # any I/O failure is this file's, not the job's
            return DeadLetter(source.uri, "read", f"cannot read: {type(e).__name__}: {e}"), 0
        try:
            image = check_image(data, s.max_pixels, s.encoding)
        except BadImage as e:
            return DeadLetter(source.uri, e.stage, e.reason), len(data)
        features = image_features(s.keys, image, label_id + s.label_offset, source.label, source.uri, source.key)
        example = encode_example(features)
        first_frame = FirstFrame(source.uri, image.frames) if image.frames > 1 else None
        digest = content_digest(data)
        facts = image_facts(s.keys, image, source.label)
        record = Record(
            source.split,
            source.label,
            image.converted,
            example,
            first_frame,
            source.uri,
            digest,
            image.orientation,
            facts,
        )
        return record, len(data)

    def release(self) -> None:
        """Closes the parts records were appended to."""
        self._appender.release()
