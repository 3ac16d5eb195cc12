"""Conversion settings: defaults, overlaid by a YAML file (`--config`), overlaid by flags.

Unknown YAML keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from pipeline.contract.features import DEFAULT_IMAGE_KEYS
from pipeline.contract.manifest import KINDS
from pipeline.sharding import ShardConfig
from transforms.splits import check_split_name
from transforms.tabular import DECLARABLE_TYPES

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


@dataclasses.dataclass(frozen=True)
class ImageConfig:
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS
    max_pixels: int = 89_478_485  # Pillow's decompression-bomb threshold: ~9.5k x 9.5k
    read_threads: int = 4  # files read and checked at once per worker thread (see transforms.images)
    read_batch: int = 32  # sources handed to those threads at a time
    keys: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_IMAGE_KEYS))


@dataclasses.dataclass(frozen=True)
class ImageCsvConfig:
    uri_column: str = "image_uri"
    label_column: str = "label"
    split_column: str = "split"


@dataclasses.dataclass(frozen=True)
class CsvConfig:
    schema: Mapping[str, str] = dataclasses.field(default_factory=dict)  # column -> int64|float32|string|bool


@dataclasses.dataclass(frozen=True)
class Config:
    kind: str = "images"
    input: str = ""  # "" = the bundled sample of `kind`
    output: str = ""  # "" = output/sample[_kind]
    splits: Mapping[str, float] = dataclasses.field(default_factory=lambda: {"train": 0.8, "validation": 0.2})
    sharding: ShardConfig = ShardConfig()
    max_error_fraction: float = 0.01
    overwrite: bool = False
    image: ImageConfig = ImageConfig()
    image_csv: ImageCsvConfig = ImageCsvConfig()
    csv: CsvConfig = CsvConfig()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ConfigError(f"kind {self.kind!r} is not one of {KINDS}")
        if not self.splits or any(f <= 0 for f in self.splits.values()) or abs(sum(self.splits.values()) - 1) > 1e-6:
            raise ConfigError(f"split fractions must be positive and sum to 1, got {dict(self.splits)}")
        for name in self.splits:
            check_split_name(name)
        if not 0 <= self.max_error_fraction <= 1:
            raise ConfigError("max_error_fraction must be between 0 and 1")
        if self.image.read_threads < 1 or self.image.read_batch < 1:
            raise ConfigError("image.read_threads and image.read_batch must be >= 1")
        unknown_roles = set(self.image.keys) - set(DEFAULT_IMAGE_KEYS)
        if unknown_roles:
            raise ConfigError(
                f"image.keys: unknown roles {sorted(unknown_roles)}; roles are {sorted(DEFAULT_IMAGE_KEYS)}"
            )
        bad_types = {c: t for c, t in self.csv.schema.items() if t not in DECLARABLE_TYPES}
        if bad_types:
            raise ConfigError(f"csv.schema: types must be one of {DECLARABLE_TYPES}, got {bad_types}")

    @property
    def input_uri(self) -> str:
        return self.input or str(SAMPLE_INPUTS[self.kind])

    @property
    def output_uri(self) -> str:
        return self.output or SAMPLE_OUTPUTS[self.kind]

    @property
    def split_fractions(self) -> tuple[tuple[str, float], ...]:
        return tuple(self.splits.items())

    @property
    def image_keys(self) -> dict[str, str]:
        return {**DEFAULT_IMAGE_KEYS, **self.image.keys}


def _build(cls, values: Mapping[str, Any], where: str):
    """A dataclass from a mapping, recursing into dataclass-typed fields; unknown keys are errors."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(fields)
    if unknown:
        raise ConfigError(f"{where or 'config'}: unknown key(s) {sorted(unknown)}; known: {sorted(fields)}")
    kwargs = {}
    for name, value in values.items():
        default = fields[name].default
        if dataclasses.is_dataclass(default):
            kwargs[name] = _build(type(default), value, f"{where}{name}.")
        elif isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where or 'config'}: {e}") from e


_SECTIONS = {f.name for f in dataclasses.fields(Config) if dataclasses.is_dataclass(f.default)}


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Override wins key by key inside sections (sharding, image, ...); other values, such as
    the `splits` mapping, are replaced whole."""
    merged = dict(base)
    for key, value in override.items():
        if key in _SECTIONS and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def load_config(path: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Config from an optional YAML file, with `overrides` (nested, e.g. from flags) on top."""
    values: dict[str, Any] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                values = yaml.safe_load(f) or {}
        except OSError as e:
            raise ConfigError(f"cannot read config {path}: {e}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"config {path} is not valid YAML: {e}") from e
    return _build(Config, merge(values, overrides or {}), "")


def to_dict(config: Config) -> dict[str, Any]:
    """JSON-ready settings, for the manifest."""
    return dataclasses.asdict(config)
