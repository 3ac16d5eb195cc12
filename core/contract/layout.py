"""The names of the files in a dataset folder.

    <split>-SSSSS-of-NNNNN.tfrecord.gz   records of one split (e.g. train-00003-of-00010.tfrecord.gz);
                                         `.tfrecord` when uncompressed (compression: none)
    <split>-SSSSS-of-NNNNN.array_record  the same records in ArrayRecord files (format: array_record)
    index/<shard>.idx                    with `index: true`: one "offset length" line per record, in a
                                         folder of its own so that no reader's shard pattern matches it
    dataset_info.json, features.json     uncompressed only: TFDS metadata (pipeline.tfds_metadata),
    <label key>.labels.txt               and its class names
    errors-00000-of-00001.jsonl          dead letters, one JSON object a line
    copies-00000-of-00001.jsonl          sources with the same bytes, a group a line (only when there are)
    manifest.json                        written last: its presence means the dataset is complete
    manifest.rejected.json               written instead by a run that must not be trusted
    .<name>.<random>.tmp                 a file being written under a fresh name, then renamed to <name>
    .staging-<run>/                      everything a run writes until it commits (pipeline.folder_store)

Every file a manifest names is a relative path of plain names inside the dataset's folder
(`is_contained`): readers refuse a manifest naming `../x` or `/etc/passwd`.

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
COPIES_PREFIX = "copies"
STATISTICS_NAME = "statistics.pb"  # pipeline.statistics_file
SOURCES_NAME = "sources.jsonl.gz"  # a refresh version's sources: pipeline.source_list
SHARD_PARTS_FOLDER = ".shard-parts"  # transforms.shard_parts; gone once the shards are final
STAGING_PREFIX = ".staging-"  # + the run's name (core.contract.versions.new_run)
_TEMPORARY = re.compile(r"\.(.+)\.[A-Za-z0-9_]+" + re.escape(TEMPORARY_SUFFIX), re.DOTALL)
_UNSAFE_CHARACTERS = re.compile(r"[\x00-\x1f\x7f\\]")


def is_remote(uri: str) -> bool:
    """A URI with a scheme (gs://...), as opposed to a local path."""
    return "://" in uri


def join(folder: str, name: str) -> str:
    """`folder/name` for local paths and gs:// prefixes alike."""
    return folder.rstrip("/") + "/" + name


def temporary_name(name: str, token: str) -> str:
    """The name a file `name` is written under before it is renamed into place: hidden, with a
    random `token`, so no two writers share it and no reader's pattern (`train-*`) matches it."""
    return f".{name}.{token}{TEMPORARY_SUFFIX}"


def temporary_of(name: str) -> str | None:
    """The name a temporary file (temporary_name, or the older `<name>.tmp`) stands for, else None."""
    match = _TEMPORARY.fullmatch(name)
    if match:
        return match.group(1)
    return name.removesuffix(TEMPORARY_SUFFIX) if name.endswith(TEMPORARY_SUFFIX) else None


def is_contained(name: str) -> bool:
    """Whether a file name, as a manifest holds it, stays inside the dataset's folder: a relative
    path of plain names (none empty, `.` or `..`), without a scheme, backslashes or control
    characters."""
    if not name or name.startswith("/") or "://" in name or _UNSAFE_CHARACTERS.search(name):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


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


GZIP, UNCOMPRESSED = "GZIP", "NONE"  # a manifest's `compression`
_RECORD_FILES = {GZIP: ShardedFileTemplate(".tfrecord.gz"), UNCOMPRESSED: ShardedFileTemplate(".tfrecord")}
ERROR_FILES = ShardedFileTemplate(".jsonl")
# The most a line of a report (ERROR_FILES) may hold, for its readers: a dead letter's source and
# reason are a few kB at most (a path, and at most ten names or lines).
REPORT_LINE_CHARS = 1 << 20
INDEX_SUFFIX = ".idx"  # the index format NVIDIA DALI and the `tfrecord` package share
INDEX_FOLDER = "index"  # below the dataset's folder: readers glob `train-*`, `*.tfrecord*` in it
TFDS_METADATA_FILES = ("dataset_info.json", "features.json")  # beside uncompressed shards
TFDS_LABELS_SUFFIX = ".labels.txt"  # and the class names of a ClassLabel, when there is one


TFRECORD, ARRAY_RECORD = "tfrecord", "array_record"  # a manifest's `file_format` (TFDS's names for them)
FILE_FORMATS = (TFRECORD, ARRAY_RECORD)
_ARRAY_RECORD_FILES = ShardedFileTemplate(".array_record")


def record_files(compression: str, file_format: str = TFRECORD) -> ShardedFileTemplate:
    """The shard names of a dataset whose manifest says `compression` (GZIP or NONE) and
    `file_format` (ArrayRecord files compress their chunks themselves: their compression is NONE)."""
    if file_format == ARRAY_RECORD:
        return _ARRAY_RECORD_FILES
    if file_format != TFRECORD:
        raise ValueError(f"unknown file format {file_format!r}, expected one of {list(FILE_FORMATS)}")
    try:
        return _RECORD_FILES[compression]
    except KeyError:
        raise ValueError(f"unknown compression {compression!r}, expected one of {sorted(_RECORD_FILES)}") from None


def index_file(shard: str) -> str:
    """The index of shard file `shard`, relative to the dataset's folder (as a manifest names it)."""
    return f"{INDEX_FOLDER}/{shard}{INDEX_SUFFIX}"
