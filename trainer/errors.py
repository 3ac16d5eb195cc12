"""The trainer's errors: each is a mistake in how the job was called or in the data it was
pointed at, and its message is one line that says what to change."""

import re


class TrainerError(ValueError):
    """Base class: the CLI prints `error: <message>` and exits 2."""


class ManifestNotFoundError(TrainerError):
    """DEST holds no manifest.json (not a dataset, or a conversion that did not finish)."""


class DatasetRejectedError(TrainerError):
    """DEST holds a run the pipeline rejected (manifest.rejected.json): never train on it."""


class IncompleteManifestError(TrainerError):
    """manifest.json exists but lacks what training needs (a split, shards, features, keys)."""


class FileFormatError(TrainerError):
    """The shards are in a file format the trainer's tf.data input does not read (ArrayRecord)."""


class MissingFeatureError(TrainerError):
    """A feature key the job needs (e.g. --label) is not in the dataset's feature spec."""


class BatchSizeError(TrainerError):
    """The global batch size is larger than a split (no full batch could ever be formed)."""


class ShardLengthError(TrainerError):
    """A shard holds more or fewer records than the manifest says (cut short, replaced or appended
    to after the conversion): epochs counted from the manifest would repeat or skip records unseen."""

    MARK = "shard length mismatch: "  # heads the message of input_fn.read_shard's check

    @classmethod
    def from_op_error(cls, error) -> "ShardLengthError | None":
        """The error TensorFlow raised from read_shard's check, as one line; None for any other."""
        found = re.search(re.escape(cls.MARK) + r"(.*)\]", error.message or "")
        if found is None:
            return None
        check = "`python -m pipeline inspect DEST --verify` checks every shard"
        return cls(f"{found.group(1)}: the shard changed after the conversion ({check})")
