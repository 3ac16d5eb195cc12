"""One image source into its record or its dead letter: read the file, check it, build its Example,
and, when given a shard part, append the record there.

The same conversion runs on ReadImages' threads and in the converting processes of a local run
(transforms.convert_pool), so there is no Beam here, and remote sources load pipeline.storage
(Beam's file systems) only when one is read.
"""

from __future__ import annotations

import dataclasses

from pipeline.contract.layout import UNCOMPRESSED, is_remote
from pipeline.local_files import open_regular
from transforms.example_proto import image_example
from transforms.image_check import BadImage, Encoding, check_image
from transforms.outcomes import DeadLetter, Record, Source, Written
from transforms.part_appender import PartAppender


def read_source(uri: str) -> bytes:
    """A source file's bytes: local files directly (regular files only, else NotARegularFile:
    pipeline.local_files), anything else through Beam's file systems."""
    if is_remote(uri):
        from pipeline import storage  # Beam: only for remote sources (module docstring)

        return storage.read_bytes(uri)
    with open_regular(uri) as f:
        return f.read()


@dataclasses.dataclass(frozen=True)
class ImageSettings:
    """What every conversion of a run shares. `label_offset` is added to every label id (1 for
    ImageNet-style readers, whose labels are 1-based); `encoding` says how images not stored byte
    for byte are encoded (jpeg_only); `compression` is that of the shard parts records are
    appended to (GZIP or NONE; records given no part, or worth deflating, are returned whole)."""

    label_map: tuple[str, ...]
    keys: dict[str, str]
    max_pixels: int
    label_offset: int = 0
    encoding: Encoding = Encoding()
    compression: str = UNCOMPRESSED

    def __post_init__(self):
        if self.label_offset < 0:
            raise ValueError("label_offset must be >= 0")


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
        return Written(outcome.split, outcome.label, outcome.converted, len(outcome.data), part, piece), bytes_read

    def _record(self, source: Source) -> tuple[Record | DeadLetter, int]:
        s = self._settings
        label_id = self._label_ids.get(source.label)
        if label_id is None:
            return DeadLetter(
                source.uri, "label", f"label {source.label!r} is not in the label map (source added after planning?)"
            ), 0
        try:
            data = read_source(source.uri)
        except Exception as e:  # any I/O failure is this file's, not the job's
            return DeadLetter(source.uri, "read", f"cannot read: {type(e).__name__}: {e}"), 0
        try:
            image = check_image(data, s.max_pixels, s.encoding)
        except BadImage as e:
            return DeadLetter(source.uri, e.stage, e.reason), len(data)
        example = image_example(s.keys, image, label_id + s.label_offset, source.label, source.uri, source.key)
        return Record(source.split, source.label, image.converted, example), len(data)

    def release(self) -> None:
        """Closes the parts records were appended to."""
        self._appender.release()
