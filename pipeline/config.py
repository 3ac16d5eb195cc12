"""Conversion settings: defaults, overlaid by a YAML file (`--config`), overlaid by flags.

Every setting is checked by type and range when the config is loaded (pydantic models): a bad one
is a ConfigError of one line naming the file or flag, the key (`image.read_threads`), the value and
what is expected. Booleans must be YAML booleans (`true`/`false`, unquoted: the string "no" would be
truthy), integers must be integers (not 2.5 or "4"), numbers must be numbers. Unknown keys are
errors too, with the closest known key suggested, so a typo never silently falls back to a
default. Image extensions are normalised: `jpg` and `.JPG` both mean `.jpg` (files are matched by
their lower-cased extension).
"""

from __future__ import annotations

import difflib
import os
import pathlib
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic
import pydantic.dataclasses
from pydantic import Field, Strict

from core.contract.features import DEFAULT_IMAGE_KEYS, ORIGINAL_SIZE_KEYS
from core.contract.layout import ARRAY_RECORD, FILE_FORMATS, TFRECORD
from core.contract.manifest import KINDS
from core.local_files import NotYaml, load_yaml
from core.shown import quoted
from pipeline.flags import CONVERT_FLAGS
from pipeline.lease import LEASE_SECONDS
from pipeline.sharding import MAX_SHARD_MIB, MAX_SHARDS, ShardConfig
from transforms.csv_dialect import AUTO
from transforms.folder_layout import LAYOUTS
from transforms.image_check import (
    ALPHA_MODES,
    DEFAULT_MAX_PIXELS,
    JPEG_QUALITY,
    Encoding,
    default_jpeg_quality,
    max_pixels_limit,
)
from transforms.image_convert import DEFAULT_MAX_FILE_MIB, MAX_FILE_MIB
from transforms.image_resize import Resize
from transforms.splits import check_split_name
from transforms.tabular import DECLARABLE_TYPES, MAX_COLUMNS

# The bundled sample, converted when no --input is given. It lives beside the packages in a source
# checkout only: it is not packaged (setup.py), so an installed copy asks for --input instead of
# writing a demo dataset into whatever folder it was started in.
SAMPLE_DIR = pathlib.Path(__file__).resolve().parent.parent / "sample"
SAMPLE_INPUTS = {
    "images": SAMPLE_DIR / "images",
    "image_csv": SAMPLE_DIR / "images.csv",
    "csv": SAMPLE_DIR / "tabular" / "*.csv*",
}
SAMPLE_OUTPUTS = {"images": "output/sample", "image_csv": "output/sample_image_csv", "csv": "output/sample_csv"}
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")


class ConfigError(ValueError):
    pass


# Scalars as YAML writes them, never converted: a bool is not an int, "4" is not a number, 2.5 is
# not an int (an int is a float, though: `target_shard_mib: 128`).
Bool = Annotated[bool, Strict()]
Int = Annotated[int, Strict()]
Float = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Str = Annotated[str, Strict()]
Name = Annotated[str, Strict(), Field(min_length=1)]
Fraction = Annotated[float, Strict(), Field(gt=0, le=1, allow_inf_nan=False)]

_SECTION = pydantic.ConfigDict(extra="forbid", frozen=True)
# Every number has an upper bound (tests/test_bounded_inputs.py walks the models for one): a huge
# value would otherwise be taken, and then hang a run or fail it late for another reason.
MAX_READ_THREADS = 256  # reading threads per worker: past this, threads only contend
MAX_READ_BATCH = 1024  # sources in flight per worker, each up to image.max_file_mib in memory
MAX_LOCAL_PROCESSES = 1024  # converting processes on one machine: more than any machine has cores
MAX_LABEL_OFFSET = 10**9  # a class id plus it stays within int32, the label type of most readers
_EXTENSION = re.compile(r"\.[^./\\\s*?]+")  # one suffix, as transforms.sources.extension_of finds it


@pydantic.dataclasses.dataclass(frozen=True, config=pydantic.ConfigDict(extra="forbid"))
class ShardingConfig(ShardConfig):
    """pipeline.sharding.ShardConfig (which it is), with its settings checked as the rest are."""

    target_shard_mib: Annotated[Float, Field(gt=0, le=MAX_SHARD_MIB)] = ShardConfig.target_shard_mib
    min_shard_mib: Annotated[Float, Field(gt=0, le=MAX_SHARD_MIB)] = ShardConfig.min_shard_mib
    # a split has at most MAX_SHARDS shards (what the 5-digit shard names hold), so no more per host
    shards_per_host: Annotated[Int, Field(ge=1, le=MAX_SHARDS)] = ShardConfig.shards_per_host
    reader_hosts: Annotated[Int, Field(ge=1, le=MAX_SHARDS)] = ShardConfig.reader_hosts
    num_shards: Annotated[Int, Field(ge=0, le=MAX_SHARDS)] = ShardConfig.num_shards  # > 0 overrides everything


class ResizeConfig(pydantic.BaseModel):
    """image.resize: sources larger than one bound stored scaled down to it (transforms.image_resize)."""

    model_config = _SECTION

    shorter_side: Annotated[Int, Field(ge=1, le=max_pixels_limit())] | None = None
    longer_side: Annotated[Int, Field(ge=1, le=max_pixels_limit())] | None = None

    @pydantic.model_validator(mode="after")
    def _one_bound(self):
        if self.shorter_side is not None and self.longer_side is not None:
            raise ValueError("give shorter_side or longer_side, not both")
        return self

    @property
    def bound(self) -> Resize:
        return Resize(self.shorter_side, self.longer_side)


class ImageConfig(pydantic.BaseModel):
    model_config = _SECTION

    # matched case-insensitively; `jpg` and `.JPG` are normalised to `.jpg`
    extensions: Annotated[tuple[Str, ...], Field(min_length=1)] = IMAGE_EXTENSIONS
    max_pixels: Annotated[Int, Field(ge=1, le=max_pixels_limit())] = DEFAULT_MAX_PIXELS
    # longer sources are dead letters, unread (transforms.image_convert.read_source)
    max_file_mib: Annotated[Int, Field(ge=1, le=MAX_FILE_MIB)] = DEFAULT_MAX_FILE_MIB
    # files read and checked at once per worker thread (see transforms.images)
    read_threads: Annotated[Int, Field(ge=1, le=MAX_READ_THREADS)] = 4
    # sources handed to those threads at a time, each up to max_file_mib in memory
    read_batch: Annotated[Int, Field(ge=1, le=MAX_READ_BATCH)] = 32
    # images converted (read, checked, encoded, written) in this many processes on the default local
    # runner ("auto": one per usable core from 3 cores on, else none); other runners convert on the
    # threads (pipeline.runners.image_processes)
    local_processes: Literal["auto"] | Annotated[Int, Field(ge=0, le=MAX_LOCAL_PROCESSES)] = "auto"
    # on the default local runner, each record goes into its shard as it is made (false: through
    # WriteToTFRecord, as on every other runner; pipeline.runners.writes_while_reading)
    local_write_while_reading: Bool = True
    keys: dict[Str, Name] = Field(default_factory=lambda: dict(DEFAULT_IMAGE_KEYS))
    # Reader profiles (configs/tpu_resnet.yaml). image/class/label = label id + label_offset: 1 for
    # ImageNet-style readers, whose labels are 1-based. The manifest records it.
    label_offset: Annotated[Int, Field(ge=0, le=MAX_LABEL_OFFSET)] = 0
    jpeg_only: Bool = False  # every source but a JPEG TF decodes re-encoded to RGB JPEG (counted as converted)
    # of every JPEG the pipeline encodes; none given: 90 where images are resized, else 95
    # (transforms.image_check.default_jpeg_quality). The manifest records the quality used.
    jpeg_quality: Annotated[Int, Field(ge=1, le=100)] = JPEG_QUALITY
    alpha: Literal[ALPHA_MODES] = "composite"  # jpeg_only: transparency composited on white, or dropped
    # sources with an EXIF orientation, which TF ignores: stored as they are and named in the
    # manifest's warnings (keep), or re-encoded as a photo viewer shows them (apply; converted)
    exif_orientation: Literal["keep", "apply"] = "keep"
    # class_folders (SRC/<label>/...), split_folders (SRC/<split>/<label>/...), or auto: decided by
    # the names of the folders below the input (transforms.folder_layout)
    layout: Literal[LAYOUTS] = AUTO
    # sources whose shorter side is below this are dead letters naming both sizes: for readers whose
    # crop keeps a fraction of that side (configs/tpu_resnet.yaml, configs/model_garden.yaml); 1: none
    min_side: Annotated[Int, Field(ge=1, le=max_pixels_limit())] = 1
    # sources larger than this are stored scaled down to it, as JPEG of jpeg_quality, and their records
    # keep their full size too: {shorter_side: N} or {longer_side: N}; {}: stored at their own size
    resize: ResizeConfig = ResizeConfig()

    @property
    def encoding(self) -> Encoding:
        upright = self.exif_orientation == "apply"
        resize = self.resize.bound
        return Encoding(
            self.jpeg_only, self.jpeg_quality, self.alpha, upright=upright, min_side=self.min_side, resize=resize
        )

    @pydantic.model_validator(mode="after")
    def _encodable(self):
        self.encoding  # noqa: B018 (its checks: a resize below min_side is refused)
        return self

    @pydantic.model_validator(mode="before")
    @classmethod
    def _default_quality(cls, data):
        """The default quality made explicit (it depends on `resize`), so that the manifest and a
        refresh's comparison of settings see the quality the images are encoded at."""
        if not isinstance(data, dict) or data.get("jpeg_quality") is not None:
            return data
        try:
            resize = ResizeConfig.model_validate(data.get("resize", {}))
        except pydantic.ValidationError:
            return data  # reported where `resize` itself is validated
        return {**data, "jpeg_quality": default_jpeg_quality(resize.bound)}

    @pydantic.field_validator("extensions", mode="before")
    @classmethod
    def _a_list(cls, value):
        if not isinstance(value, list | tuple):
            raise ValueError("should be a list of extensions, e.g. [.jpg, .png]")
        return value

    @pydantic.field_validator("extensions")
    @classmethod
    def _normalised(cls, extensions: tuple[str, ...]) -> tuple[str, ...]:
        normalised = []
        for extension in extensions:
            dotted = "." + extension.strip().lower().removeprefix(".")
            if not _EXTENSION.fullmatch(dotted):
                raise ValueError(f"{quoted(extension)} is not a file extension like .jpg (one suffix, no wildcards)")
            if dotted not in normalised:
                normalised.append(dotted)
        return tuple(normalised)

    @pydantic.field_validator("keys")
    @classmethod
    def _known_roles(cls, keys: dict[str, str]) -> dict[str, str]:
        roles = {**DEFAULT_IMAGE_KEYS, **ORIGINAL_SIZE_KEYS}
        unknown = set(keys) - set(roles)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}; roles are {sorted(roles)}")
        features = list({**roles, **keys}.values())
        if len(set(features)) < len(features):
            shared = sorted({f for f in features if features.count(f) > 1})
            raise ValueError(f"two roles would write the same feature key: {shared}")
        return keys


class ImageCsvConfig(pydantic.BaseModel):
    model_config = _SECTION

    uri_column: Name = "image_uri"
    label_column: Name = "label"
    split_column: Name = "split"
    # where rows may name images besides the CSV's own folder: local folders (made absolute) and
    # gs:// prefixes; naming a gs:// prefix confines gs:// URIs too (transforms.sources.Roots). Each
    # row is checked against each root.
    roots: Annotated[tuple[Name, ...], Field(max_length=100)] = ()

    @pydantic.field_validator("roots")
    @classmethod
    def _folders(cls, roots: tuple[str, ...]) -> tuple[str, ...]:
        for root in roots:
            if "://" in root and not re.fullmatch(r"gs://[^/]+(/.*)?", root):
                raise ValueError(f"{quoted(root)} is neither a local folder nor a gs:// prefix (gs://bucket/folder)")
        return tuple(root if "://" in root else os.path.abspath(root) for root in roots)


class CsvConfig(pydantic.BaseModel):
    model_config = _SECTION

    schema_: dict[Str, Literal[DECLARABLE_TYPES]] = Field(default_factory=dict, alias="schema")  # column -> type
    # The character between fields: auto (chosen from the first file's header and first rows, among
    # , ; tab |: transforms.csv_dialect), or the one given.
    delimiter: Str = AUTO
    # The sign before a number's fraction: auto (",", where the first file's first rows write numbers
    # with a comma before their fraction and none with a point: transforms.csv_dialect), "." or ","
    # (46,70 is 46.7, and a value holding "." is text).
    decimal: Literal[AUTO, ".", ","] = AUTO
    # Whether the first row of every file is a header: auto (as the first file's first rows show:
    # a row whose cells do not fit the types of the columns below it is one), true or false.
    header: Literal[AUTO] | Bool = AUTO
    # The names of the columns of files without a header, in order (default column_1, column_2, ...).
    columns: Annotated[tuple[Name, ...], Field(max_length=MAX_COLUMNS)] = ()
    # The column of each row's class or target (transforms.label_column): its classes go into the
    # manifest's label map, a string column's values stored as their class ids; auto: the column
    # named `label`, if there is one; "" for none.
    label: Str = AUTO

    @property
    def schema(self) -> dict[str, str]:
        return self.schema_

    @pydantic.field_validator("delimiter")
    @classmethod
    def _one_character(cls, delimiter: str) -> str:
        if delimiter != AUTO and (len(delimiter) != 1 or delimiter.isalnum() or delimiter in '"\r\n'):
            raise ValueError(
                "should be auto or one character that is not a letter, digit, quote or line end, such as ';' or "
                '"\\t" (tab, in double quotes)'
            )
        return delimiter


class HoldConfig(pydantic.BaseModel):
    """When a refresh holds its new version instead of publishing it (pipeline.hold_checks): it is
    committed in its folder, LATEST stays, and the run exits 4 naming each check that failed,
    until `refresh --promote VERSION`. Classes and columns that disappeared, and columns whose
    type changed, are always held."""

    model_config = _SECTION

    enabled: Bool = True  # false: publish every refresh that verifies, as before drift checks
    # records down by more than this fraction of the previous version's
    records_drop: Annotated[Float, Field(ge=0, le=1)] = 0.2
    # the distribution checks below apply when both versions hold at least this many records:
    # under it, a few sources added or removed move a class's share past any useful bound
    min_records: Annotated[Int, Field(ge=0, le=10**12)] = 1000
    # the label distribution's L-infinity distance (the largest change in one class's share)
    label_linf: Annotated[Float, Field(ge=0, le=1)] = 0.1
    # a number column's approximate Jensen-Shannon divergence (base 2: 0 to 1), in any split
    numeric_js: Annotated[Float, Field(ge=0, le=1)] = 0.1
    # the error fraction more than this many times the previous one ...
    error_growth: Annotated[Float, Field(ge=1, le=1000)] = 3.0
    # ... and at least this fraction of the sources (a few errors where there were none are no drift)
    min_error_fraction: Annotated[Float, Field(ge=0, le=1)] = 0.001


class Config(pydantic.BaseModel):
    """The settings of a run. Build it with load_config (its errors are ConfigErrors)."""

    model_config = _SECTION

    kind: Literal[KINDS] = "images"
    input: Str = ""  # "" = the bundled sample of `kind`
    output: Str = ""  # "" = output/sample[_kind]
    splits: dict[Str, Fraction] = Field(default_factory=lambda: {"train": 0.8, "validation": 0.2})
    sharding: ShardingConfig = ShardingConfig()
    max_error_fraction: Annotated[Float, Field(ge=0, le=1)] = 0.01
    overwrite: Bool = False
    # write into an output folder that holds files or folders of the user's too (pipeline.preflight)
    allow_other_files: Bool = False
    # tfrecord: TFRecord files, read in order (tf.data); array_record: ArrayRecord files, read with
    # random access (Grain, TFDS data_source), their chunks compressed by array_record itself.
    format: Literal[FILE_FORMATS] = TFRECORD
    # gzip (tfrecord's default): smaller files (a little for photos, much for tabular data); none:
    # readers that cannot read GZIP (TFDS, the TPU reference readers), random access through
    # `index`. array_record: none only, its default.
    compression: Literal["gzip", "none"] | None = Field(None, validate_default=True)
    index: Bool = False  # write index/<shard>.idx files (uncompressed TFRecords only)
    # How long the output's lease outlives its last renewal (every third of it): a run stalled
    # longer (a suspended laptop or VM) may be taken over, and then touches nothing (pipeline.lease).
    lease_seconds: Annotated[Int, Field(ge=2, le=7 * 86_400)] = LEASE_SECONDS
    # List requests in flight at once, on the launcher and in each worker of the job's listing
    # step (gs:// pages one request at a time per range of names, so ranges are listed side by side).
    listing_threads: Annotated[Int, Field(ge=1, le=256)] = 16
    image: ImageConfig = ImageConfig()
    image_csv: ImageCsvConfig = ImageCsvConfig()
    csv: CsvConfig = CsvConfig()
    hold: HoldConfig = HoldConfig()  # refresh only

    @pydantic.field_validator("splits")
    @classmethod
    def _splits(cls, splits: dict[str, float]) -> dict[str, float]:
        if not splits or abs(sum(splits.values()) - 1) > 1e-6:
            raise ValueError("split fractions must be positive and sum to 1")
        for name in splits:
            check_split_name(name)
        return splits

    @pydantic.field_validator("compression")
    @classmethod
    def _compression_of_the_format(cls, compression: str | None, info: pydantic.ValidationInfo) -> str:
        array_record = info.data.get("format") == ARRAY_RECORD
        if compression is None:
            return "none" if array_record else "gzip"
        if array_record and compression != "none":
            raise ValueError(
                "does not apply to format array_record, whose files compress their chunks themselves: "
                "leave it out or set none"
            )
        return compression

    @pydantic.field_validator("index")
    @classmethod
    def _index_needs_uncompressed(cls, index: bool, info: pydantic.ValidationInfo) -> bool:
        if index and info.data.get("format") == ARRAY_RECORD:
            raise ValueError("does not apply to format array_record, whose files hold their own index of records")
        if index and info.data.get("compression") != "none":
            raise ValueError("needs compression: none (an offset into a GZIP stream cannot be read at)")
        return index

    @property
    def input_uri(self) -> str:
        """--input, or in a source checkout the bundled sample; ConfigError (exit 2) otherwise."""
        if self.input:
            return self.input
        if not (SAMPLE_DIR / "images").is_dir():
            raise ConfigError(
                "--input is required: give the folder, CSV or file pattern to convert "
                "(the bundled sample is only in a source checkout)"
            )
        return str(SAMPLE_INPUTS[self.kind])

    @property
    def output_uri(self) -> str:
        return self.output or SAMPLE_OUTPUTS[self.kind]

    @property
    def split_fractions(self) -> tuple[tuple[str, float], ...]:
        return tuple(self.splits.items())

    @property
    def image_keys(self) -> dict[str, str]:
        """The feature key of each role records have: the original size roles only where sources
        are resized."""
        roles = {**DEFAULT_IMAGE_KEYS, **(ORIGINAL_SIZE_KEYS if self.image.resize.bound.enabled else {})}
        return {role: self.image.keys.get(role, key) for role, key in roles.items()}


def _keys(cls) -> list[str]:
    """The YAML keys of a section."""
    return [field.alias or name for name, field in cls.__pydantic_fields__.items()]


_SECTIONS = {
    name: field.annotation
    for name, field in Config.model_fields.items()
    if isinstance(field.annotation, type) and hasattr(field.annotation, "__pydantic_fields__")
}
_KNOWN = {
    (): _keys(Config),
    **{(name,): _keys(cls) for name, cls in _SECTIONS.items()},
    ("image", "resize"): _keys(ResizeConfig),
}
# Where each conversion flag lands (Flag.key): `--num_shards` in sharding.num_shards, `--image_roots` in
# image_csv.roots, the others at the top.
_FLAG_KEYS = {f.key: f"--{f.name}" for f in CONVERT_FLAGS if f.name != "config"}


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Override wins key by key inside sections (sharding, image, ...); other values, such as
    the `splits` mapping, are replaced whole."""
    merged = dict(base)
    for key, value in override.items():
        if key in _SECTIONS and isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def load_config(path: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Config from an optional YAML file, with `overrides` (nested, e.g. from flags) on top."""
    values: Any = {}
    if path:
        try:
            # A FIFO or a device (or a link to one) is refused, not read: a FIFO's open would wait
            # for a writer, a device's read might never end (NotARegularFile, an OSError).
            values = load_yaml(path)
        except OSError as e:
            raise ConfigError(f"cannot read config {path}: {e.strerror or e}") from e  # strerror: no repeated path
        except NotYaml as e:
            raise ConfigError(f"config {path} {e}") from e
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise ConfigError(f"config {path}: should be a mapping of settings, got {type(values).__name__}")
    overrides = overrides or {}
    try:
        return Config.model_validate(merge(values, overrides))
    except pydantic.ValidationError as e:
        errors = e.errors()
        problems = [_describe(error, path, values, overrides) for error in errors[:_PROBLEMS_SHOWN]]
        more = f"; and {len(errors) - _PROBLEMS_SHOWN:,} more" if len(errors) > _PROBLEMS_SHOWN else ""
        raise ConfigError("; ".join(problems) + more) from None


def _given(values: Mapping[str, Any], loc: tuple) -> bool:
    """Whether `values` (YAML or overrides) set the key at `loc`, or the value that holds it."""
    if not loc or loc[0] not in values:
        return False
    section = values[loc[0]]
    return not (loc[0] in _SECTIONS and len(loc) > 1 and isinstance(section, Mapping)) or loc[1] in section


_SHOULD = {
    "bool_type": "should be true or false (a YAML boolean, unquoted)",
    "int_type": "should be an integer",
    "float_type": "should be a number",
    "string_type": "should be a string",
    "dict_type": "should be a mapping",
    "model_type": "should be a mapping",
    "dataclass_type": "should be a mapping",
    "finite_number": "should be a finite number",
}


# A refusal names this many problems at most (a list of 60,000 bad values is 60,000 problems), and
# shows a bad value as core.shown.quoted does: by its start, never a whole long string or nested
# structure (an expanded YAML alias may hold a million values).
_PROBLEMS_SHOWN = 10


def _describe(error: Mapping[str, Any], path: str | None, values: Mapping, overrides: Mapping) -> str:
    """One problem, on one line: where it was set, the key, what is wrong, the value."""
    loc = tuple(part for part in error["loc"] if part != "[key]")
    key = ".".join(str(part) for part in loc) or "config"
    if _given(overrides, loc):
        flag = _FLAG_KEYS.get(loc[:2]) or _FLAG_KEYS.get(loc[:1])
        where = f"flag {flag}" if flag else "overrides"
        key = key if flag != f"--{key}" else ""  # the flag names it
    elif path and _given(values, loc):
        where = f"config {path}"
    else:
        where = "config"
    if error["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        known = _KNOWN.get(loc[:-1], [])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {quoted(close[0])}? " if close else ""
        return f"{where}: {key}: unknown key; {hint}known keys here: {', '.join(known)}"
    if error["type"] == "value_error":
        problem = str(error["ctx"]["error"])
    elif error["type"] == "too_short":
        problem = f"should have at least {error['ctx']['min_length']} item(s)"
    else:
        problem = _SHOULD.get(error["type"]) or error["msg"].replace("Input should", "should", 1)
    value = error["input"]
    got = f"got {quoted(value)}" + (" (a string)" if isinstance(value, str) else "")
    return f"{where}: {key + ': ' if key else ''}{problem}, {got}"


def to_dict(config: Config) -> dict[str, Any]:
    """JSON-ready settings, for the manifest (keys as in the YAML)."""
    return config.model_dump(by_alias=True)


def with_defaults(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as a manifest recorded them (to_dict), with each setting they lack at its default:
    a version made before a setting existed was made as its default makes one."""
    return merge(to_dict(Config()), settings)
