"""What becomes of each listed source: a record, a skip, or a dead letter.

Every listed source produces exactly one outcome, so the run's counts reconcile by construction:
listed = written + skipped + errors.
"""

from __future__ import annotations

import dataclasses
import json
from typing import NamedTuple

from transforms.dataset_statistics import DatasetStatistics, Value
from transforms.same_content import SameContent, SameContentSummary

METRICS_NAMESPACE = "tfrecord_pipeline"
DEAD_LETTERS = "dead_letters"  # tag of the dead-letter output of every DoFn that can fail
SKIPPED = "skipped"


class Source(NamedTuple):
    """One source to convert. `key` is what the split hash and error reports use."""

    uri: str
    key: str
    label: str
    split: str


class FirstFrame(NamedTuple):
    """A record re-encoded from the first of its source's frames or pages (animated GIF, WebP or
    PNG; multi-page TIFF), which the run reports: the others are in no record."""

    source: str
    frames: int


class Record(NamedTuple):
    """An Example to write. An image's also names its source, the digest of the source's bytes
    (transforms.same_content) and the EXIF orientation it does not apply. `facts`: its values as
    the dataset's statistics take them (transforms.dataset_statistics), by column name."""

    split: str
    label: str
    converted: bool
    data: bytes  # serialised tf.train.Example
    first_frame: FirstFrame | None = None
    source: str = ""
    digest: bytes = b""
    orientation: int = 1  # 2-8: the source's EXIF orientation, not applied (transforms.image_check)
    facts: dict[str, Value] | None = None


class Written(NamedTuple):
    """A record already appended to a shard part by the process that made it: where it went
    (`part`, and its transforms.gzip_pieces.Piece there) and how many bytes its Example has."""

    split: str
    label: str
    converted: bool
    payload_bytes: int
    part: str
    piece: tuple
    first_frame: FirstFrame | None = None
    source: str = ""
    digest: bytes = b""
    orientation: int = 1
    facts: dict[str, Value] | None = None


class Skipped(NamedTuple):
    source: str
    extension: str


# Stages whose dead letters share one cause a file at a time, not each a cause of its own: every row
# of a CSV whose header differs from the dataset's, or a CSV whose header cannot be read, fails for
# that header. A rejection names that cause and its fix, not a --max_error_fraction that would only
# drop the file's rows (pipeline.publish.over_budget); a report shows a file's as one line
# (pipeline.report.first_errors).
WHOLE_FILE_STAGES = ("header",)


class DeadLetter(NamedTuple):
    source: str
    stage: str
    reason: str

    def to_json(self) -> str:
        return json.dumps(self._asdict(), ensure_ascii=False, sort_keys=True)


# What a viewer does to show an image of each EXIF orientation, in exiftool's words.
EXIF_ORIENTATIONS = {
    2: "Mirror horizontal",
    3: "Rotate 180",
    4: "Mirror vertical",
    5: "Mirror horizontal and rotate 270 CW",
    6: "Rotate 90 CW",
    7: "Mirror horizontal and rotate 90 CW",
    8: "Rotate 270 CW",
}


def _add(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


@dataclasses.dataclass
class OutcomeSummary:
    """The counts the manifest reports: small dicts, whatever the number of records."""

    written: dict[str, int] = dataclasses.field(default_factory=dict)  # records per split
    bytes: dict[str, int] = dataclasses.field(default_factory=dict)  # payload bytes per split
    labels: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # split -> label -> records
    converted: int = 0  # records whose image was re-encoded
    first_frames: int = 0  # ... from the first of several frames
    first_frame_example: FirstFrame | None = None  # of those, the one of the first source by name
    turned: int = 0  # records of sources with an EXIF orientation they do not apply
    turned_example: tuple[str, int] | None = None  # of those, (source, orientation) of the first by name
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)  # per extension
    errors: dict[str, int] = dataclasses.field(default_factory=dict)  # per stage
    same_content: SameContentSummary = dataclasses.field(default_factory=SameContentSummary)
    # Of the records' facts; sketches, whose approximations depend on the order of merges, so no
    # part of comparing two summaries.
    statistics: DatasetStatistics = dataclasses.field(default_factory=DatasetStatistics, compare=False)

    def add(self, outcome: Record | Written | Skipped | DeadLetter | SameContent) -> None:
        if isinstance(outcome, Record | Written):
            _add(self.written, outcome.split)
            _add(
                self.bytes, outcome.split, outcome.payload_bytes if isinstance(outcome, Written) else len(outcome.data)
            )
            if outcome.label:
                _add(self.labels.setdefault(outcome.split, {}), outcome.label)
            self.statistics.add(outcome.split, outcome.facts or {})
            self.converted += outcome.converted
            if outcome.first_frame:
                self._add_first_frames(1, outcome.first_frame)
            if outcome.orientation != 1:
                self._add_turned(1, (outcome.source, outcome.orientation))
        elif isinstance(outcome, Skipped):
            _add(self.skipped, outcome.extension)
        elif isinstance(outcome, SameContent):
            self.same_content.add(outcome)
        else:
            _add(self.errors, outcome.stage)

    def merge(self, other: OutcomeSummary) -> None:
        for mine, theirs in (
            (self.written, other.written),
            (self.bytes, other.bytes),
            (self.skipped, other.skipped),
            (self.errors, other.errors),
        ):
            for key, n in theirs.items():
                _add(mine, key, n)
        for split, labels in other.labels.items():
            for label, n in labels.items():
                _add(self.labels.setdefault(split, {}), label, n)
        self.converted += other.converted
        self.same_content.merge(other.same_content)
        self.statistics.merge(other.statistics)
        if other.first_frames:
            self._add_first_frames(other.first_frames, other.first_frame_example)
        if other.turned:
            self._add_turned(other.turned, other.turned_example)

    def _add_first_frames(self, n: int, example: FirstFrame) -> None:
        self.first_frames += n
        if self.first_frame_example is None or example.source < self.first_frame_example.source:
            self.first_frame_example = example

    def _add_turned(self, n: int, example: tuple[str, int]) -> None:
        self.turned += n
        if self.turned_example is None or example < self.turned_example:
            self.turned_example = example

    def warnings(self) -> list[str]:
        """What the manifest must tell readers about these outcomes."""
        return self._first_frames_warnings() + self._turned_warnings() + self.same_content.warnings()

    def _turned_warnings(self) -> list[str]:
        if not self.turned:
            return []
        source, orientation = self.turned_example
        return [
            f"{self.turned:,} source(s) have an EXIF orientation, which TensorFlow's decoders ignore: their records "
            "decode as stored, turned or mirrored from what a photo viewer shows (for example "
            f"{source}: orientation {orientation}, {EXIF_ORIENTATIONS[orientation]!r} as exiftool names it); "
            "image.exif_orientation: apply stores them as a viewer shows them"
        ]

    def _first_frames_warnings(self) -> list[str]:
        if not self.first_frames:
            return []
        example = self.first_frame_example
        return [
            f"{self.first_frames:,} source(s) have more than one frame or page (animated GIF, WebP or PNG; "
            "multi-page TIFF) and were re-encoded: their records hold the first only, as "
            "tf.io.decode_image(expand_animations=False) reads one stored as it is "
            f"(for example {example.source}: {example.frames} frames)"
        ]
