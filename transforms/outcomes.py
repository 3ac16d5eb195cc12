"""What becomes of each listed source: a record, a skip, or a dead letter.

Every listed source produces exactly one outcome, so the run's counts reconcile by construction:
listed = written + skipped + errors.
"""

from __future__ import annotations

import dataclasses
import json
from typing import NamedTuple

METRICS_NAMESPACE = "tfrecord_pipeline"
DEAD_LETTERS = "dead_letters"  # tag of the dead-letter output of every DoFn that can fail
SKIPPED = "skipped"


class Source(NamedTuple):
    """One source to convert. `key` is what the split hash and error reports use."""

    uri: str
    key: str
    label: str
    split: str


class Record(NamedTuple):
    split: str
    label: str
    converted: bool
    data: bytes  # serialised tf.train.Example


class Written(NamedTuple):
    """A record already appended to a shard part by the process that made it: where it went
    (`part`, and its transforms.gzip_pieces.Piece there) and how many bytes its Example has."""

    split: str
    label: str
    converted: bool
    payload_bytes: int
    part: str
    piece: tuple


class Skipped(NamedTuple):
    source: str
    extension: str


class DeadLetter(NamedTuple):
    source: str
    stage: str
    reason: str

    def to_json(self) -> str:
        return json.dumps(self._asdict(), ensure_ascii=False, sort_keys=True)


def _add(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


@dataclasses.dataclass
class OutcomeSummary:
    """The counts the manifest reports: small dicts, whatever the number of records."""

    written: dict[str, int] = dataclasses.field(default_factory=dict)  # records per split
    bytes: dict[str, int] = dataclasses.field(default_factory=dict)  # payload bytes per split
    labels: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # split -> label -> records
    converted: int = 0  # records whose image was re-encoded
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)  # per extension
    errors: dict[str, int] = dataclasses.field(default_factory=dict)  # per stage

    def add(self, outcome: Record | Written | Skipped | DeadLetter) -> None:
        if isinstance(outcome, Record | Written):
            _add(self.written, outcome.split)
            _add(
                self.bytes, outcome.split, outcome.payload_bytes if isinstance(outcome, Written) else len(outcome.data)
            )
            if outcome.label:
                _add(self.labels.setdefault(outcome.split, {}), outcome.label)
            self.converted += outcome.converted
        elif isinstance(outcome, Skipped):
            _add(self.skipped, outcome.extension)
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
