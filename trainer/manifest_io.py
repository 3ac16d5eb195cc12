"""Reading a dataset's manifest.json (the format and the one reader: core.contract) and checking
that it holds what training needs. Everything the job knows about the data -- shard files, record
counts, feature spec, label map -- comes from here; the data itself is never scanned to learn it.

Local files are opened by core.local_files.open_regular, inside the folder given as --data: a FIFO,
a device or a link out of it (a version folder's included) is refused in one line, and so is such
a shard before tf.data opens it (shard_paths). gs:// has neither, and is read through tf.io.gfile."""

from __future__ import annotations

import dataclasses
import functools
import logging

import tensorflow as tf

from core.contract import manifest as contract
from core.contract.folders import FolderKindError, dataset_folder
from core.contract.layout import TFRECORD, is_remote, join
from core.contract.manifest import FeatureSpec, Manifest, SplitInfo
from core.contract.versions import LatestPointerError
from core.local_files import LeadsOutside, NotARegularFile, check_regular, open_regular
from trainer.errors import (
    DatasetRejectedError,
    FileFormatError,
    FileRefusedError,
    IncompleteManifestError,
    ManifestNotFoundError,
    MissingFeatureError,
    TrainerError,
)

_LOG = logging.getLogger(__name__)


def read_text(path: str, *, inside: str) -> str | None:
    """The text of a file inside the folder `inside`, or None when there is no such file; a local
    one that is not a regular file inside it raises FileRefusedError (module docstring). The
    trainer's one reader of files (model.json too: trainer.model_dir)."""
    if not is_remote(path):
        try:
            with open_regular(path, inside=inside) as f:
                return f.read().decode("utf-8")
        except FileNotFoundError:
            return None
        except (NotARegularFile, LeadsOutside) as e:
            raise FileRefusedError(str(e)) from None
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "r") as f:
        return f.read()


def list_names(folder: str) -> list[str]:
    """The names directly in a folder through tf.io.gfile ([] when there is none)."""
    return tf.io.gfile.listdir(folder) if tf.io.gfile.isdir(folder) else []


def resolve_data(data: str) -> str:
    """The dataset folder to train on: `data` itself, or the version a refresh ROOT's LATEST names
    (core.contract.folders); a ROOT without a version yet, or a folder that is both, is refused."""
    try:
        return dataset_folder(data, functools.partial(read_text, inside=data), list_names)
    except (FolderKindError, LatestPointerError) as e:
        raise TrainerError(str(e)) from e


def load_manifest(data: str, inside: str | None = None) -> Manifest:
    """The manifest of the dataset in `data`, read as a file inside `inside` (the folder given as
    --data, when `data` is the version its LATEST names; else `data`); raises
    ManifestNotFoundError / DatasetRejectedError / IncompleteManifestError / FileRefusedError."""
    try:
        manifest = contract.read_manifest(data, functools.partial(read_text, inside=inside or data))
    except contract.ManifestRejectedError as e:
        raise DatasetRejectedError(f"{e} (fix the input and convert again; the error report is beside it)") from e
    except contract.ManifestNotFoundError as e:
        raise ManifestNotFoundError(f"{e} (--data must be a folder the pipeline converted)") from e
    except contract.ManifestError as e:
        raise IncompleteManifestError(str(e)) from e
    if manifest.file_format != TFRECORD:
        raise FileFormatError(
            f"{data}: its shards are {manifest.file_format} files, and the trainer reads TFRecords with tf.data: "
            "convert with --format tfrecord to train on it here (Grain or TFDS data_source read ArrayRecord files)"
        )
    if not manifest.splits:
        raise IncompleteManifestError(f"{data}: the manifest lists no splits")
    if not manifest.features:
        raise IncompleteManifestError(f"{data}: the manifest has no feature spec")
    return manifest


def log_dataset(given: str, data: str, manifest: Manifest) -> None:
    """The dataset a job trains on, in a log line (once the job is checked: a mistake in the call
    is its only line)."""
    if data != given:
        _LOG.info("%s/LATEST names %s", given.rstrip("/"), data)
    _LOG.info(
        "dataset %s: kind %s, %s",
        data,
        manifest.kind,
        ", ".join(f"{s.name} {s.records} records in {len(s.shards)} shard(s)" for s in manifest.splits.values()),
    )


def split_info(manifest: Manifest, split: str) -> SplitInfo:
    """A split that exists and has records and shard files."""
    info = manifest.splits.get(split)
    if info is None:
        raise IncompleteManifestError(f"the manifest has no {split!r} split (it has {sorted(manifest.splits)})")
    if info.records <= 0 or not info.shards:
        raise IncompleteManifestError(
            f"split {split!r} is empty in the manifest ({info.records} records, {len(info.shards)} shard files)"
        )
    return info


EVAL_SPLITS = ("validation", "test")  # evaluated on by default: the first the dataset has


def eval_split(manifest: Manifest, flag: str | None) -> str:
    """The split to evaluate on: --eval_split when given, else the first of EVAL_SPLITS the dataset
    has (image folders split as train/ and test/ have no validation split)."""
    if flag:
        return flag
    for name in EVAL_SPLITS:
        if name in manifest.splits:
            return name
    raise IncompleteManifestError(
        f"the dataset has no {' or '.join(map(repr, EVAL_SPLITS))} split to evaluate on "
        f"(it has {sorted(manifest.splits)}): name one with --eval_split"
    )


def shard_paths(data: str, manifest: Manifest, split: str) -> list[str]:
    """The paths of a split's shards, each checked as a regular file inside `data` before
    tf.data opens it (core.local_files.check_regular): FileRefusedError names one that is not."""
    paths = [join(data, shard) for shard in split_info(manifest, split).shards]
    for path in paths:
        if not is_remote(path):
            try:
                check_regular(path, inside=data)
            except (NotARegularFile, LeadsOutside) as e:
                raise FileRefusedError(str(e)) from None
    return paths


def feature(manifest: Manifest, name: str, what: str = "feature") -> FeatureSpec:
    """The spec of feature `name`; MissingFeatureError names the features there are."""
    spec = manifest.features.get(name)
    if spec is None:
        raise MissingFeatureError(
            f"{what} {name!r} is not a feature of this dataset; it has: {', '.join(sorted(manifest.features))}"
        )
    return spec


def image_feature_keys(manifest: Manifest) -> tuple[str, str]:
    """(encoded image key, label key) of an image dataset, checked against the feature spec."""
    if not manifest.is_image_dataset:
        raise IncompleteManifestError(f"dataset kind {manifest.kind!r} is not an image dataset")
    keys = {}
    for role in ("encoded", "label"):
        key = manifest.image_keys.get(role)
        if not key:
            raise IncompleteManifestError(
                f"the manifest's image_keys lack the {role!r} role (has {sorted(manifest.image_keys)})"
            )
        spec = feature(manifest, key, f"image {role} key")
        expected = "string" if role == "encoded" else "int64"
        if spec.dtype != expected:
            raise IncompleteManifestError(f"image {role} feature {key!r} is {spec.dtype}, expected {expected}")
        keys[role] = key
    if not manifest.label_map:
        raise IncompleteManifestError("the manifest of an image dataset has an empty label_map")
    return keys["encoded"], keys["label"]


@dataclasses.dataclass(frozen=True)
class StoredImages:
    """What the conversion's settings promise of every stored image of a dataset, so that decoding
    can leave out branches no record takes: each is a JPEG (config image.jpeg_only), and none has a
    shorter side over `max_short_side` (config image.resize: either bound caps it). The defaults
    promise nothing: every branch stays."""

    all_jpeg: bool = False
    max_short_side: int | None = None


def stored_images(manifest: Manifest) -> StoredImages:
    """The promises of the settings the manifest records: jpeg_only exactly true (a value of
    another type, in a manifest written by hand or by another version, promises nothing), and the
    bound of image.resize (Manifest.stored_bound: either side caps the shorter one)."""
    image = manifest.options.get("image")
    bound = manifest.stored_bound
    return StoredImages(isinstance(image, dict) and image.get("jpeg_only") is True, bound[1] if bound else None)
