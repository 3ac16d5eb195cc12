"""The manifest: the contract between the conversion pipeline and every reader of its output.

`DEST/manifest.json` is written last, after the job has read every shard back and found exactly the
records it produced, so its presence means the dataset is complete and verified. It says what was
written (splits, shard files, records per shard), how to read it (feature spec, label map) and what
went wrong (counts, error files), so a reader never scans data to learn its size. A run that must
not be trusted writes `manifest.rejected.json` instead, with the reasons in `rejected`.

No I/O here: `read_manifest` takes the caller's `read_text`, so the pipeline (Beam FileSystems),
the trainer (tf.io.gfile) and tests (pathlib) share one reader.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from core.contract import json_text
from core.contract.layout import (
    FILE_FORMATS,
    GZIP,
    MANIFEST_NAME,
    REJECTED_MANIFEST_NAME,
    TFRECORD,
    UNCOMPRESSED,
    ShardedFileTemplate,
    is_contained,
    join,
    record_files,
)

FORMAT = "tfrecord-examples"
FORMAT_VERSION = 3  # 2: shard_lengths, rejected; 3: compression NONE, index_files, metadata_files, label_offset
# 4: shards in another file format than TFRecord (file_format), which a reader of format 3 would
# take for TFRecords: so only such manifests have it, and TFRecord datasets stay readable by them.
OTHER_FILE_FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
COMPRESSIONS = (GZIP, UNCOMPRESSED)
SCHEMA_NAME = "manifest.schema.json"  # beside this module, in the wheel too (setup.py package_data)
# The most a manifest may hold. The largest a run writes are a few tens of MB: three splits of
# 99,999 indexed shards, 100,000 columns, a label map and label counts of a million classes.
MAX_MANIFEST_CHARS = 256 << 20

# Feature dtypes are TensorFlow dtype names, so a reader can call tf.as_dtype(dtype).
DTYPES = ("string", "int64", "float32")
KINDS = ("images", "image_csv", "csv")  # class folders, a CSV of image URIs, tabular CSV files
IMAGE_KINDS = ("images", "image_csv")
RESIZE_SIDES = ("shorter_side", "longer_side")  # the bounds config image.resize takes, one at most


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of manifest.json as this version writes it, so that a reader
    in any language, or a check, validates a manifest without this code. Read through
    importlib.resources: the same from a source tree, an installed wheel or a zip."""
    return json_text.loads(resources.files(__package__).joinpath(SCHEMA_NAME).read_text(encoding="utf-8"), 1 << 20)


class ManifestError(ValueError):
    """A manifest that is missing, incomplete or of another format."""


class ManifestRejectedError(ManifestError):
    """The folder holds only a rejected run's manifest: readers must refuse it."""

    def __init__(self, message: str, manifest: Manifest):
        super().__init__(message)
        self.manifest = manifest


class ManifestNotFoundError(ManifestError):
    """The folder holds no manifest.json: not a dataset, or a conversion that did not finish."""


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """One feature of every record: `tf.io.FixedLenFeature(shape, dtype)` when required,
    `tf.io.VarLenFeature(dtype)` (or FixedLen with a default) when some records lack it."""

    name: str
    dtype: str
    shape: tuple[int, ...] = ()
    required: bool = True

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ManifestError(f"feature {self.name!r}: dtype {self.dtype!r} is not one of {DTYPES}")


@dataclasses.dataclass(frozen=True)
class SplitInfo:
    """What one split holds: its shard files (relative to the dataset folder, in order) and the
    records counted in each when the job read them back (`shard_lengths`, in the same order, as
    TFDS keeps them; empty in format 1 manifests)."""

    name: str
    records: int
    shards: tuple[str, ...]
    bytes: int = 0
    label_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    shard_lengths: tuple[int, ...] = ()
    index_files: tuple[str, ...] = ()  # with `index: true`, one per shard, in the same order

    def __post_init__(self):
        _check_contained(f"split {self.name!r}", (*self.shards, *self.index_files))


@dataclasses.dataclass(frozen=True)
class Counts:
    """Source accounting. `listed == written + skipped + errors`; converted records are written
    records whose image was re-encoded to a format TensorFlow decodes."""

    listed: int
    written: int
    converted: int
    skipped: int
    errors: int

    def reconciles(self) -> bool:
        return self.listed == self.written + self.skipped + self.errors and 0 <= self.converted <= self.written


@dataclasses.dataclass(frozen=True)
class Listing:
    """What the planner listed before the run. `sources`: the outcomes (records, skips, dead
    letters) the job must account for, where known in advance (None for tabular rows)."""

    files: int
    bytes: int
    fingerprint: str  # equal fingerprints mean unchanged input (see pipeline.planning)
    sources: int | None = None


@dataclasses.dataclass(frozen=True)
class Manifest:
    kind: str  # "images", "image_csv" or "csv"
    splits: dict[str, SplitInfo]
    features: dict[str, FeatureSpec]
    counts: Counts
    # label id -> class name: sorted, but a refresh keeps the earlier ids. Tabular data: the
    # classes of `label_column` (its strings, or "0".."K-1" for int64 class ids); empty for a float
    # target or none.
    label_map: tuple[str, ...] = ()
    # Tabular data: the column each record's class or target is in (csv.label); "" for none.
    label_column: str = ""
    # What the image label feature holds is label id + label_offset (1 for ImageNet-style readers).
    label_offset: int = 0
    error_files: tuple[str, ...] = ()
    # Image kinds: the groups of sources with the same bytes, a JSON object a line (none: no copies).
    copies_files: tuple[str, ...] = ()
    errors_by_stage: dict[str, int] = dataclasses.field(default_factory=dict)
    skipped_by_extension: dict[str, int] = dataclasses.field(default_factory=dict)
    max_error_fraction: float = 0.0
    error_fraction: float = 0.0
    # Keys of the image features, for readers that expect other names (config `image.keys`).
    image_keys: dict[str, str] = dataclasses.field(default_factory=dict)
    inputs: dict[str, Any] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    listing: Listing | None = None
    package_version: str = ""
    created: str = ""
    compression: str = GZIP  # of every shard: GZIP or NONE (core.contract.layout.record_files)
    file_format: str = TFRECORD  # of every shard: tfrecord or array_record (format_version 4)
    array_record_options: str = ""  # array_record: the options its writer was given (group_size, chunk compression)
    run: str = ""  # the run that wrote it (its start time, as core.contract.versions names it)
    rejected: tuple[str, ...] = ()  # why the run must not be trusted (manifest.rejected.json only)
    # What a user of the data should know that no count says (a column of numbers that a few
    # values made string): printed with the run's summary and by `inspect`.
    warnings: tuple[str, ...] = ()

    # Files written beside the dataset for other readers (TFDS metadata), relative to the folder.
    metadata_files: tuple[str, ...] = ()
    # The statistics the job computed (transforms.dataset_statistics), relative to the folder.
    statistics_file: str = ""
    # A refresh version: the version ROOT/LATEST named when it was made ("" for the first, or convert).
    previous_version: str = ""
    # A refresh version LATEST did not move to: the drift checks it failed against
    # `previous_version` (pipeline.hold_checks), until a person promotes it.
    held: tuple[str, ...] = ()
    # A refresh version: the sources it was made of (path, size, generation), relative to the folder.
    sources_file: str = ""

    @property
    def records(self) -> int:
        """The records of every split together."""
        return sum(split.records for split in self.splits.values())

    @property
    def report_files(self) -> tuple[str, ...]:
        """The reports written beside the records: the error files, the copies files, the
        statistics and the sources."""
        named = (self.statistics_file, self.sources_file)
        return (*self.error_files, *self.copies_files, *(name for name in named if name))

    def __post_init__(self):
        _check_contained("the manifest", (*self.report_files, *self.metadata_files))
        if self.compression not in COMPRESSIONS:
            raise ManifestError(f"compression {self.compression!r} is not one of {COMPRESSIONS}")
        if self.file_format not in FILE_FORMATS:
            raise ManifestError(f"file_format {self.file_format!r} is not one of {FILE_FORMATS}")
        if not isinstance(self.label_offset, int) or self.label_offset < 0:
            raise ManifestError(f"label_offset {self.label_offset!r} is not an integer >= 0")

    @property
    def format_version(self) -> int:
        """The format_version to_json writes: the oldest that describes this manifest."""
        return FORMAT_VERSION if self.file_format == TFRECORD else OTHER_FILE_FORMAT_VERSION

    @property
    def record_files(self) -> ShardedFileTemplate:
        """The names of the shards (core.contract.layout.record_files)."""
        return record_files(self.compression, self.file_format)

    @property
    def tf_compression_type(self) -> str:
        """The shards' `compression_type` for tf.data.TFRecordDataset."""
        return "GZIP" if self.compression == GZIP else ""

    @property
    def is_image_dataset(self) -> bool:
        return self.kind in IMAGE_KINDS

    @property
    def error_budget_exceeded(self) -> bool:
        return self.error_fraction > self.max_error_fraction

    @property
    def stored_bound(self) -> tuple[str, int] | None:
        """(side, pixels): the bound an image dataset's images were stored within, as its
        options.image.resize names it (one of RESIZE_SIDES, a whole number >= 1, the other side
        unset), or None: no side named (the setting off, a manifest older than it) or a setting
        that is not one. Every reader of the setting reads it here."""
        image = self.options.get("image") if self.is_image_dataset else None
        resize = image.get("resize") if isinstance(image, dict) else None
        if not isinstance(resize, dict) or not set(resize) <= set(RESIZE_SIDES):
            return None
        named = [(side, resize[side]) for side in RESIZE_SIDES if resize.get(side) is not None]
        if len(named) != 1 or type(named[0][1]) is not int or named[0][1] < 1:
            return None
        return named[0]

    def to_json(self) -> str:
        body = dataclasses.asdict(self)
        body["splits"] = {name: dataclasses.asdict(s) for name, s in self.splits.items()}
        body["features"] = {name: dataclasses.asdict(f) for name, f in self.features.items()}
        for split in body["splits"].values():
            del split["name"]
        for feature in body["features"].values():
            del feature["name"]
        return json.dumps({"format": FORMAT, "format_version": self.format_version, **body}, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """The manifest `text` holds, checked against manifest.schema.json before any of it is used
        (reading_schema: older format versions, keys left out); ManifestError, one line naming
        where it differs (a JSON path) and how, when it is not JSON, not a manifest, or another
        shape than the schema's."""
        try:
            body = json_text.loads(text, MAX_MANIFEST_CHARS)
        except json_text.NotJson as e:
            raise ManifestError(f"manifest {e}") from e
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            found = shown(body.get("format") if isinstance(body, dict) else body)
            raise ManifestError(f"not a {FORMAT} manifest (format {found})")
        version = body.get("format_version")
        if type(version) is not int or version not in READABLE_VERSIONS:
            raise ManifestError(f"manifest format_version {shown(version)}, this reader knows {READABLE_VERSIONS}")
        defaults = _defaults(cls)
        body = {key: value for key, value in body.items() if key not in defaults or not _is(value, defaults[key])}
        # Formats 1 and 2 are format 3 without the keys it added (they read as their defaults).
        found = schema_problem(body if version >= 3 else {**body, "format_version": FORMAT_VERSION})
        if found is not None:
            raise ManifestError(f"manifest is malformed: {found}")
        splits = {
            n: SplitInfo(name=n, **{key: tuple(v) if isinstance(v, list) else v for key, v in s.items()})
            for n, s in body["splits"].items()
        }
        features = {
            n: FeatureSpec(name=n, **{key: tuple(v) if isinstance(v, list) else v for key, v in f.items()})
            for n, f in body["features"].items()
        }
        fields = {f.name for f in dataclasses.fields(cls)} - {"splits", "features", "counts"}
        rest = {k: tuple(body[k]) if isinstance(body[k], list) else body[k] for k in fields if k in body}
        if "listing" in rest:
            rest["listing"] = Listing(**rest["listing"])
        return cls(splits=splits, features=features, counts=Counts(**body["counts"]), **rest)


def _defaults(cls) -> dict[str, Any]:
    """The fields of a dataclass that a manifest may leave out, with the value each then reads as."""
    return {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }


def _is(value: Any, default: Any) -> bool:
    """Whether a JSON value is a field's default (an empty list for an empty tuple), of its type."""
    if isinstance(default, tuple):
        return value == []
    return type(value) is type(default) and value == default


@functools.cache
def reading_schema() -> dict:
    """manifest.schema.json as a reader applies it. The schema describes what this version writes,
    every key present; a reader also takes a manifest that leaves out a key its dataclass has a
    default for, or holds it at that default (format_version 1 and 2 lack the keys later ones
    added, and other writers leave out what is empty), as the schema's description says. Its
    definitions are written out where they are used."""
    schema = json_schema()
    for part, cls in (
        (schema, Manifest),
        (schema["$defs"]["split"], SplitInfo),
        (schema["$defs"]["feature"], FeatureSpec),
        (schema["properties"]["counts"], Counts),
        (schema["properties"]["listing"], Listing),
    ):
        part["required"] = [key for key in part["required"] if key not in _defaults(cls)]
    return _inlined(schema, schema.pop("$defs"))


def _inlined(node: Any, defs: dict) -> Any:
    """`node` with each `{"$ref": "#/$defs/name"}` replaced by that definition: the same checks, made
    without looking up a reference for every column of a manifest."""
    if isinstance(node, list):
        return [_inlined(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    found = {key: _inlined(value, defs) for key, value in node.items() if key != "$ref"}
    if "$ref" in node:
        return {**_inlined(defs[node["$ref"].removeprefix("#/$defs/")], defs), **found}
    return found


def _is_integer(_checker, value: Any) -> bool:
    """An integer is a number written without a fraction (3, never 3.0, which JSON Schema counts as
    one), as this package writes them and as its readers use them (counts, indexes, ranges)."""
    return type(value) is int


@functools.cache
def _reading_validator():
    """The jsonschema validator of reading_schema, built once a process (annotations, `format`
    included, are not checked). jsonschema is imported here, when a manifest is first read, not
    with this module: the commands' flags take its names, and a Python without the project's
    packages is told so in one line (pipeline.missing_packages) before anything imports them."""
    import jsonschema

    validator = jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
    )
    return validator(reading_schema())


def schema_problem(body: Any) -> str | None:
    """Where a manifest's JSON value differs from reading_schema, as `problem` words it (the error
    jsonschema's best_match picks), or None when it does not."""
    from jsonschema.exceptions import best_match

    error = best_match(_reading_validator().iter_errors(body))
    return None if error is None else problem(error)


_TYPES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "boolean": "a boolean",
    "null": "null",
    "integer": "an integer",
    "number": "a number",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHOWN = 60  # characters of a value or key a problem shows


def problem(error) -> str:
    """What `error` says, in one line: where in the manifest (a JSON path, `$.splits.train.shards[0]`)
    and what is wrong there, describing the value (its kind, or a short scalar written as JSON)
    rather than quoting it: a manifest may hold any text, control characters too."""
    value, expected, keyword = error.instance, error.validator_value, error.validator
    if keyword == "type":
        wanted = [expected] if isinstance(expected, str) else expected
        what = f"{kind(value)} where {' or '.join(_TYPES[name] for name in wanted)} belongs"
    elif keyword == "required":
        what = "lacks " + ", ".join(repr(key) for key in expected if key not in value)
    elif keyword == "additionalProperties":
        extra = next(key for key in value if key not in error.schema.get("properties", {}))
        what = f"holds the key {shown(extra)}, which it may not"
    elif keyword in ("const", "enum"):
        options = [expected] if keyword == "const" else expected
        what = f"{shown(value)} where {' or '.join(map(json.dumps, options))} belongs"
    elif keyword == "pattern":
        what = f"{shown(value)} is not a {error.schema.get('title') or 'value its pattern takes'}"
    elif keyword in ("minimum", "maximum"):
        what = f"{shown(value)} is {'less' if keyword == 'minimum' else 'more'} than {expected}"
    elif keyword in ("minProperties", "minItems", "minLength") and not value:
        what = "is empty"
    else:
        what = f"{shown(value)} is not what {keyword} {json.dumps(expected)} takes"
    if "propertyNames" in error.absolute_schema_path:
        what = f"key {what}"
    return f"{json_path(error.absolute_path)}: {what}"


def json_path(keys) -> str:
    """`$.splits.train.shards[0]`, `$.features["a/b"]`: keys that are not plain names as JSON."""
    parts = ["$"]
    for key in keys:
        if isinstance(key, int):
            parts.append(f"[{key}]")
        elif _NAME.fullmatch(key) and len(key) <= SHOWN:
            parts.append(f".{key}")
        else:
            parts.append(f"[{shown(key)}]")
    return "".join(parts)


def kind(value: Any) -> str:
    """What a JSON value is: `an object`, `a string`, ..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    for name, python in (("object", dict), ("array", list), ("string", str), ("number", float)):
        if isinstance(value, python):
            return _TYPES[name]
    return "null"


def shown(value: Any) -> str:
    """A scalar as JSON (escaped: no control characters) when it is short, else what it is."""
    if isinstance(value, (dict, list)) or value is None:
        return kind(value)
    text = json.dumps(value)
    if len(text) <= SHOWN:
        return text
    if isinstance(value, str):
        return f"a string of {len(value):,} characters"
    return f"{kind(value)} of {len(text):,} digits"


def _check_contained(where: str, names) -> None:
    """A manifest names files inside its folder only (layout.is_contained): a reader that followed
    `../x` or `/etc/passwd` would read what is not the dataset."""
    for name in names:
        if not isinstance(name, str) or not is_contained(name):
            raise ManifestError(f"{where} names the file {name!r}, which is not a plain name inside its folder")


def read_manifest(folder: str, read_text: Callable[[str], str | None]) -> Manifest:
    """The manifest of the dataset in `folder`. `read_text(path)` returns a file's text, or None
    when there is no such file. Raises ManifestRejectedError when the folder holds a rejected
    run, ManifestNotFoundError when it holds no run, or ManifestError naming the file."""
    manifest = read_committed_manifest(folder, read_text)
    if manifest is None:
        rejected = read_rejected_manifest(folder, read_text)
        if rejected is not None:
            raise ManifestRejectedError(
                f"{folder} holds a rejected run (created {rejected.created}), not a dataset: "
                + "; ".join(rejected.rejected),
                rejected,
            )
        raise ManifestNotFoundError(
            f"{join(folder, MANIFEST_NAME)} not found: not a converted dataset, or its conversion did not finish"
        )
    return manifest


def read_committed_manifest(folder: str, read_text: Callable[[str], str | None]) -> Manifest | None:
    """The manifest.json of `folder`, None when it has none (whatever else it holds: for a writer
    deciding what a folder holds); ManifestError naming the file when it cannot be read."""
    return read_manifest_file(join(folder, MANIFEST_NAME), read_text)


def read_manifest_file(path: str, read_text: Callable[[str], str | None]) -> Manifest | None:
    """The manifest in the file at `path` (a run's staging folder keeps copies under other names),
    None when there is no such file; ManifestError naming the file when it cannot be read."""
    text = read_text(path)
    return None if text is None else _parse(path, text)


def read_rejected_manifest(folder: str, read_text: Callable[[str], str | None]) -> Manifest | None:
    """The manifest.rejected.json of `folder`, or None when there is none."""
    path = join(folder, REJECTED_MANIFEST_NAME)
    text = read_text(path)
    return None if text is None else _parse(path, text)


def _parse(path: str, text: str) -> Manifest:
    try:
        return Manifest.from_json(text)
    except ManifestError as e:
        raise ManifestError(
            f"{path}: {e} (damaged, or not written by tfrecord-pipeline: convert the data again)"
        ) from e
