"""`inspect --verify`: read every record of a dataset and check it against its manifest.

Per record: the GZIP stream (if compressed), the TFRecord framing and both CRCs
(pipeline.tfrecord_reader), or an ArrayRecord file's chunk hashes (core.array_record_files), and
the record's line in the shard's index (if it has one), parsing against the manifest's feature
spec, and for image datasets decoding the image as readers do (`tf.io.decode_image(...,
expand_animations=False)`) and comparing it with its recorded height, width and channels, and its
label; where images are stored resized (the manifest's image_keys name the original size roles),
its stored size against its original one and the bound (options.image.resize). Then the record
counts per shard, per split (and per label) against the manifest, stray shard files, and the error
reports. TensorFlow parses and decodes; it is imported only when a verification runs.
"""

from __future__ import annotations

import collections
import dataclasses
import logging

from core import storage
from core.contract import tf_import
from core.contract.features import parse_spec
from core.contract.json_text import NotJson, json_lines
from core.contract.layout import REPORT_LINE_CHARS, join
from core.contract.manifest import Manifest
from core.local_files import LeadsOutside, NotARegularFile
from core.shown import quoted
from core.tfrecord_framing import FRAMING_BYTES
from pipeline.report import stored_resize
from pipeline.shard_check import index_text
from pipeline.shard_records import read_shard
from pipeline.tfrecord_reader import RecordError

_LOG = logging.getLogger(__name__)

PARSE_BATCH = 128
FIRST_UNLISTED = 5  # of the files a split's pattern matches that the manifest does not list, the names shown


def import_tensorflow():
    """TensorFlow, quietly; one line naming the extra to install when it is missing."""
    return tf_import.import_tensorflow("inspect --verify / --contact_sheet")


@dataclasses.dataclass
class Verification:
    problems: list[str] = dataclasses.field(default_factory=list)
    records: dict[str, int] = dataclasses.field(default_factory=dict)  # per split
    shard_records: dict[str, int] = dataclasses.field(default_factory=dict)  # per shard file
    labels: dict[str, collections.Counter] = dataclasses.field(default_factory=dict)  # per split

    def problem(self, text: str) -> None:
        _LOG.debug("problem: %s", text)
        self.problems.append(text)


class _ImageChecker:
    """Per record of an image dataset: the image decodes, its size matches its recorded height,
    width and channels, its label id and text agree with the label map, and, stored resized, its
    size is what image.resize makes of its recorded original size."""

    def __init__(self, manifest: Manifest):
        self.keys = manifest.image_keys
        self.label_map = manifest.label_map
        self.label_offset = manifest.label_offset
        self.resize = stored_resize(manifest)

    def check(self, tf, example: dict) -> tuple[str | None, str | None]:
        """(problem or None, class name or None) for one parsed example (numpy values)."""
        keys = self.keys
        label = None
        if keys.get("label") in example:
            stored = int(example[keys["label"]])  # the label id + the manifest's label_offset
            label_id = stored - self.label_offset
            if not 0 <= label_id < len(self.label_map):
                first, last = self.label_offset, self.label_offset + len(self.label_map) - 1
                return f"label {stored} is outside the label map ({first}..{last})", None
            label = self.label_map[label_id]
            text = example.get(keys.get("text"))
            if text is not None and text.decode("utf-8", "replace") != label:
                return f"label text {text!r} does not match label {stored} ({label!r})", label
        encoded = example.get(keys.get("encoded"))
        if encoded is None:
            return "no encoded image", label
        try:
            shape = tf.io.decode_image(encoded, expand_animations=False).shape
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as e:
            return f"image does not decode: {e.message.splitlines()[0] if e.message else type(e).__name__}", label
        # The writer stores what this decode returns (transforms.image_check), channels included:
        # a reader that trusts the stored channels to size its tensors must get exactly that many.
        for role, actual in (("height", shape[0]), ("width", shape[1]), ("channels", shape[2])):
            if keys.get(role) in example and int(example[keys[role]]) != actual:
                return f"decoded {role} {actual} differs from the recorded {int(example[keys[role]])}", label
        return self._check_original_size(example, shape[1], shape[0]), label

    def _check_original_size(self, example: dict, width: int, height: int) -> str | None:
        """A record of a dataset stored resized: its original size (turned as stored) is at least
        its stored `width` x `height`; one above the bound is stored scaled down to it
        (Resize.target), one within it at its original size."""
        keys = self.keys
        if keys.get("original_width") not in example or keys.get("original_height") not in example:
            return None
        original = int(example[keys["original_width"]]), int(example[keys["original_height"]])
        sizes = f"stored at {width}x{height}, its original size {original[0]}x{original[1]}"
        if original[0] < width or original[1] < height:
            return f"{sizes}: stored larger than its original"
        if self.resize is None:
            return None
        target = self.resize.target(*original)
        bound = f"(image.resize: {self.resize.describe()})"
        if target is not None and target != (width, height):
            return f"{sizes}: above the bound {bound}, it should be stored at {target[0]}x{target[1]}"
        if target is None and original != (width, height):
            return f"{sizes}: within the bound {bound}, it should be stored at its original size"
        return None


def _verify_batch(tf, spec, batch, shard_name, split, result: Verification, image_checker):
    """Parse a batch of (record number, bytes); on failure find the failing records one by one."""
    serialized = [data for _, data in batch]
    try:
        parsed = tf.io.parse_example(serialized, spec)
        rows = rows_of(parsed, len(batch))
    except tf.errors.InvalidArgumentError:
        rows = []
        for index, data in batch:
            try:
                rows.append(rows_of(tf.io.parse_example([data], spec), 1)[0])
            except tf.errors.InvalidArgumentError as e:
                result.problem(
                    f"{shard_name}: record {index}: does not parse against the feature spec: "
                    f"{e.message.splitlines()[0]}"
                )
                rows.append(None)
    for (index, _), row in zip(batch, rows, strict=True):
        if row is None or image_checker is None:
            continue
        problem, label = image_checker.check(tf, row)
        if problem:
            result.problem(f"{shard_name}: record {index}: {problem}")
        if label is not None:
            result.labels.setdefault(split, collections.Counter())[label] += 1


def rows_of(parsed: dict, n: int) -> list[dict]:
    """Parsed batch -> one {key: numpy value} per record (optional features only where present)."""
    rows = [{} for _ in range(n)]
    for key, value in parsed.items():
        if hasattr(value, "indices"):  # SparseTensor of an optional feature
            for (row, _), v in zip(value.indices.numpy(), value.values.numpy(), strict=True):
                rows[row].setdefault(key, v)
        else:
            for row, v in enumerate(value.numpy()):
                rows[row][key] = v
    return rows


def verify(dest: str, manifest: Manifest) -> Verification:
    tf = import_tensorflow()
    result = Verification()
    spec = parse_spec(manifest.features.values(), tf)
    image_checker = _ImageChecker(manifest) if manifest.is_image_dataset and manifest.image_keys else None
    if not manifest.counts.reconciles():
        c = manifest.counts
        result.problem(
            f"manifest: counts do not add up: listed {c.listed} != written {c.written} + skipped "
            f"{c.skipped} + errors {c.errors} (or converted {c.converted} > written)"
        )
    for split in manifest.splits.values():
        result.records[split.name] = 0
        totals = {_total_of(s, manifest) for s in split.shards}
        if split.shards and (len(totals) > 1 or not totals <= {None, len(split.shards)}):
            result.problem(
                f"split {split.name}: the manifest lists {len(split.shards)} shard(s) whose names say otherwise "
                f"({', '.join(split.shards[:3])}{', ...' if len(split.shards) > 3 else ''})"
            )
        if split.index_files and len(split.index_files) != len(split.shards):
            result.problem(f"split {split.name}: {len(split.index_files)} index files for {len(split.shards)} shards")
        indexes = split.index_files or (None,) * len(split.shards)
        for shard, index in zip(split.shards, indexes, strict=False):
            path = join(dest, shard)
            if not storage.exists(path):
                result.problem(f"{shard}: listed in the manifest but missing")
                result.shard_records[shard] = 0
                continue
            count, batch, framed = 0, [], []
            try:
                for offset, data in read_shard(path, manifest.compression, manifest.file_format, inside=dest):
                    framed.append((offset, len(data) + FRAMING_BYTES))
                    batch.append((count, data))
                    count += 1
                    if len(batch) >= PARSE_BATCH:
                        _verify_batch(tf, spec, batch, shard, split.name, result, image_checker)
                        batch = []
            except RecordError as e:
                result.problem(f"{shard}: record {e.record}: {e.message}")
            except (NotARegularFile, LeadsOutside) as e:  # the message names the shard's path
                result.problem(str(e))
            except OSError as e:
                result.problem(f"{shard}: cannot read: {type(e).__name__}: {e}")
            if batch:
                _verify_batch(tf, spec, batch, shard, split.name, result, image_checker)
            if index is not None:
                _check_index(dest, index, framed, result)
            result.shard_records[shard] = count
            result.records[split.name] += count
            _LOG.info("read %s: %d record(s)", shard, count)
        _check_shard_lengths(split, result)
        if result.records[split.name] != split.records:
            per_shard = ", ".join(f"{s}: {result.shard_records.get(s, 0)}" for s in split.shards)
            result.problem(
                f"split {split.name}: the manifest says {split.records} records, the shards hold "
                f"{result.records[split.name]} ({per_shard})"
            )
        if image_checker is not None and split.label_counts:
            found = result.labels.get(split.name, collections.Counter())
            for label in sorted(set(split.label_counts) | set(found)):
                if split.label_counts.get(label, 0) != found.get(label, 0):
                    result.problem(
                        f"split {split.name}: label {label!r}: the manifest says {split.label_counts.get(label, 0)} "
                        f"records, the shards hold {found.get(label, 0)}"
                    )
    _check_stray_shards(dest, manifest, result)
    _check_error_files(dest, manifest, result)
    return result


def _check_shard_lengths(split, result: Verification) -> None:
    """Each shard holds the records the manifest says it does (readers plan steps and hosts on
    them); format 1 manifests have no per-shard counts."""
    if not split.shard_lengths:
        return
    if len(split.shard_lengths) != len(split.shards):
        result.problem(f"split {split.name}: {len(split.shard_lengths)} shard lengths for {len(split.shards)} shards")
        return
    for shard, expected in zip(split.shards, split.shard_lengths, strict=True):
        if result.shard_records.get(shard, 0) != expected:
            result.problem(
                f"{shard}: the manifest says {expected} records, it holds {result.shard_records.get(shard, 0)}"
            )


def _check_index(dest: str, index: str, framed: list[tuple[int, int]], result: Verification) -> None:
    """The shard's index file says exactly where each record is, as read."""
    try:
        text = storage.read_text(join(dest, index), inside=dest)
    except (NotARegularFile, LeadsOutside) as e:  # the message names the file
        result.problem(str(e))
        return
    if text is None:
        result.problem(f"{index}: index listed in the manifest but missing")
    elif text != index_text(framed):
        lines, expected = text.splitlines(), index_text(framed).splitlines()
        first = next((i for i, (a, b) in enumerate(zip(lines, expected, strict=False)) if a != b), None)
        where = (
            f"line {first + 1} says {lines[first]!r}, record {first} is at {expected[first]!r}"
            if first is not None
            else (f"{len(lines)} lines for {len(expected)} records")
        )
        result.problem(f"{index}: does not match its shard: {where}")


def _total_of(shard: str, manifest: Manifest) -> int | None:
    """NNNNN of a shard name, or None for another name."""
    parsed = manifest.record_files.parse(shard)
    return parsed.total if parsed else None


def unlisted_matches(dest: str, manifest: Manifest) -> dict[str, list[str]]:
    """Per split, the names beside the dataset in `dest` that a reader's pattern for the split's
    shards, `<split>-*` (docs/reading.md: the TPU reference readers, Model Garden, TFX), matches
    but the manifest does not list: such a reader takes them for records of the split. {} when
    `dest` cannot be listed (that is not a problem of the data)."""
    listed = {shard for split in manifest.splits.values() for shard in split.shards}
    try:
        names = storage.children(dest)
    except Exception:
        return {}
    found = {split: [n for n in names if n.startswith(f"{split}-") and n not in listed] for split in manifest.splits}
    return {split: extra for split, extra in found.items() if extra}


def unlisted_warnings(dest: str, manifest: Manifest) -> list[str]:
    """What `inspect` says of unlisted_matches: per split, which files a globbing reader would read."""
    warnings = []
    for split, names in unlisted_matches(dest, manifest).items():
        shown_names = ("such as " if len(names) > FIRST_UNLISTED else "") + quoted(names[:FIRST_UNLISTED])
        warnings.append(
            f"{join(dest, split)}-* also matches {len(names):,} file(s) the manifest does not list, {shown_names}: a "
            f"reader that globs it reads them as records of split {split} (and fails on any that is not one); "
            "remove them, or read the shards the manifest lists"
        )
    return warnings


def _check_stray_shards(dest: str, manifest: Manifest, result: Verification) -> None:
    """A file named as a shard of a split that the manifest does not list is a problem: it looks
    like the dataset's (unlisted_warnings names every file a reader's pattern takes)."""
    for split, names in unlisted_matches(dest, manifest).items():
        for name in names:
            if manifest.record_files.is_shard_of(name, split):
                result.problem(f"{name}: a shard file of split {split} that the manifest does not list")


def _check_error_files(dest: str, manifest: Manifest, result: Verification) -> None:
    lines = 0
    for name in manifest.error_files:
        if not storage.exists(join(dest, name)):
            result.problem(f"{name}: error report listed in the manifest but missing")
            continue
        try:
            text = storage.open_text(join(dest, name), errors="replace", inside=dest)
        except (NotARegularFile, LeadsOutside) as e:  # the message names the file
            result.problem(str(e))
            continue
        with text:
            for number, letter in json_lines(text, REPORT_LINE_CHARS):
                lines += 1
                if isinstance(letter, NotJson):
                    result.problem(f"{name}: line {number}: not a dead letter (it {letter})")
                elif not isinstance(letter, dict) or not all(k in letter for k in ("source", "stage", "reason")):
                    result.problem(f"{name}: line {number}: not a dead letter (missing source/stage/reason)")
    if manifest.error_files and lines != manifest.counts.errors:
        result.problem(
            f"error reports hold {lines} dead letter(s), the manifest counts {manifest.counts.errors} errors"
        )
