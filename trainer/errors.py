"""The trainer's errors: each is a mistake in how the job was called or in the data it was
pointed at, and its message is one line that says what to change."""

import re


def op_error_cause(error) -> str:
    """The line of a TensorFlow error that says what went wrong ("corrupted record at 552678"):
    its message opens with "Graph execution error:" and the Python stack of the graph node, and
    ends with the node's name, none of which names the cause."""
    lines = [line for line in (error.message or str(error)).splitlines() if line.strip()]
    causes = [
        line
        for line in lines
        if not line[0].isspace() and not line.startswith(("Graph execution error", "Detected at node"))
    ]
    cause = causes[-1] if causes else (lines[0] if lines else type(error).__name__)
    return re.sub(r"\s*(\[\[|\[Op:).*$", "", cause).strip() or cause.strip()


class TrainerError(ValueError):
    """Base class: the CLI prints `error: <message>` and exits 2."""


class ManifestNotFoundError(TrainerError):
    """DEST holds no manifest.json (not a dataset, or a conversion that did not finish)."""


class DatasetRejectedError(TrainerError):
    """DEST holds a run the pipeline rejected (manifest.rejected.json): never train on it."""


class FileRefusedError(TrainerError):
    """A local file the trainer reads (the dataset's manifest, LATEST or a shard, inside the folder
    given as --data; model.json, inside --model_dir) is not a regular file inside its folder: a
    FIFO, a device, or a link out of it."""


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


class LabelError(TrainerError):
    """The label column cannot be trained on as given: strings where class ids are needed, or class
    ids outside 0..K-1 for the K classes of the call (--num_classes) or of the manifest."""

    MARK = "label out of range: "  # heads the message of input_fn's check of each batch's labels

    @classmethod
    def out_of_range(cls, label: str, value: int, split: str, num_classes: int, given: bool, whole: bool):
        """`value` of `label` (in `split`) is not a class id of `num_classes` classes; `given`: the
        classes came from --num_classes (else from the manifest's label_map); `whole`: `value` is the
        largest (or smallest) of the split, not only of what was read before it."""
        classes = f"--num_classes {num_classes}" if given else f"the manifest's label_map ({num_classes} classes)"
        if value < 0:
            return cls(
                f"label {label!r} holds {value} (split {split!r}), and class ids run from 0: convert the data again "
                f"with --label {label}, so that the pipeline maps its values to class ids 0..K-1"
            )
        held = f"values up to {value}" if whole else f"{value}"
        if not given:
            return cls(
                f"label {label!r} holds {held} (split {split!r}), beyond {classes}: the data changed after its "
                f"conversion; convert it again"
            )
        at_least = "" if whole else "at least "
        return cls(
            f"{classes} but label {label!r} holds {held} (split {split!r}): give --num_classes {at_least}{value + 1}"
        )

    @classmethod
    def from_op_error(cls, error, label: str, num_classes: int, given: bool) -> "LabelError | None":
        """The error TensorFlow raised from input_fn's check of `label`, as one line; None for any other."""
        found = re.search(re.escape(cls.MARK) + r"holds (-?\d+) in split (.*?)\]", error.message or "")
        if found is None:
            return None
        return cls.out_of_range(label, int(found.group(1)), found.group(2), num_classes, given, whole=False)

    @classmethod
    def strings(cls, label: str) -> "LabelError":
        return cls(
            f"label column {label!r} holds strings: convert the data again with --label {label}, so that the "
            "pipeline maps its values to class ids (or name a number column with --label)"
        )


class ModelDirError(TrainerError):
    """--model_dir holds checkpoints of another model (another architecture, dataset, label or
    number of classes): resuming from them would fail, or train on what they do not mean."""

    @classmethod
    def of(cls, model_dir: str, what: str) -> "ModelDirError":
        return cls(
            f"--model_dir {model_dir} holds {what}: give another --model_dir, or remove {model_dir} to train "
            "this model from scratch"
        )
