"""The names of the files in a dataset folder.

    <split>-SSSSS-of-NNNNN.tfrecord.gz   records of one split (e.g. train-00003-of-00010.tfrecord.gz)
    errors-00000-of-00001.jsonl          dead letters, one JSON object a line
    manifest.json                        written last: its presence means the dataset is complete
    manifest.rejected.json               written instead by a run that must not be trusted

A `ShardedFileTemplate` both formats and parses shard names (as TFDS's does), so writers, readers
and the clean-up of a previous dataset agree on one spelling.
"""

from __future__ import annotations

import dataclasses
import re

MANIFEST_NAME = "manifest.json"
REJECTED_MANIFEST_NAME = "manifest.rejected.json"
TEMPORARY_SUFFIX = ".tmp"  # written, then renamed into place
ERRORS_PREFIX = "errors"


def join(folder: str, name: str) -> str:
    """`folder/name` for local paths and gs:// prefixes alike."""
    return folder.rstrip("/") + "/" + name


@dataclasses.dataclass(frozen=True)
class ShardName:
    prefix: str  # the split name, or "errors"
    index: int
    total: int


@dataclasses.dataclass(frozen=True)
class ShardedFileTemplate:
    """`<prefix>-SSSSS-of-NNNNN<suffix>`: shard `index` (0-based) of `total`, five digits each."""

    suffix: str
    # The same pattern in the syntax of Beam's `shard_name_template` (WriteToTFRecord, WriteToText).
    BEAM_SHARD_TEMPLATE = "-SSSSS-of-NNNNN"

    def name(self, prefix: str, index: int, total: int) -> str:
        return f"{prefix}-{index:05d}-of-{total:05d}{self.suffix}"

    def parse(self, name: str) -> ShardName | None:
        """The parts of a file name of this template, or None for any other name."""
        match = re.fullmatch(r"([a-z][a-z0-9_]*)-(\d{5})-of-(\d{5})" + re.escape(self.suffix), name)
        if match is None:
            return None
        return ShardName(match.group(1), int(match.group(2)), int(match.group(3)))

    def is_shard_of(self, name: str, prefix: str) -> bool:
        parsed = self.parse(name)
        return parsed is not None and parsed.prefix == prefix

    def glob(self, prefix: str) -> str:
        """A file pattern matching every shard of `prefix`."""
        return f"{prefix}-*-of-*{self.suffix}"


RECORD_FILES = ShardedFileTemplate(".tfrecord.gz")
ERROR_FILES = ShardedFileTemplate(".jsonl")


def is_dataset_file(name: str) -> bool:
    """True for the names a conversion writes directly in its output folder."""
    errors = ERROR_FILES.parse(name)
    return (
        RECORD_FILES.parse(name) is not None
        or (errors is not None and errors.prefix == ERRORS_PREFIX)
        or name in (MANIFEST_NAME, MANIFEST_NAME + TEMPORARY_SUFFIX)
    )
