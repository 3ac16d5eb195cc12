"""What a model directory holds a model for. `MODEL_DIR/model.json`, written when a model starts
there, records what it was built for: the model, its task, label and classes, its input columns
(and string buckets). A later run pointed at the same directory resumes from its checkpoints only
when it builds the same model: otherwise it ends in one line naming what differs (ModelDirError),
before anything is read or built, instead of failing halfway through a restore or, where the
shapes happen to agree (another dataset of as many columns and classes), training on from weights
that mean something else.

Recorded but not compared: the dataset folder (a refreshed version of the same data continues the
same model) and the image size (the weights do not depend on it). A directory whose checkpoints
have no model.json beside them is left to the restore, which refuses variables that do not match
(TrainingLoop.restore).
"""

from __future__ import annotations

import json

import tensorflow as tf

from core.contract import json_text
from trainer.errors import ModelDirError
from trainer.manifest_io import read_text

SPEC_NAME = "model.json"
SPEC_BYTES = 1 << 20  # what model.json may hold: a run writes a few hundred bytes
COMPARED = ("model", "task", "label", "classes", "features", "string_buckets")
_SHOWN_CHARACTERS = 80  # of a value in a message


def latest_checkpoint(model_dir: str) -> str | None:
    return tf.train.latest_checkpoint(tf.io.gfile.join(model_dir, "checkpoints"))


def check(model_dir: str, spec: dict) -> str | None:
    """The checkpoint a run of the model `spec` describes resumes from (None: it starts afresh);
    ModelDirError when the directory's model.json records another model."""
    latest = latest_checkpoint(model_dir)
    if latest is None:
        return None
    text = read_text(tf.io.gfile.join(model_dir, SPEC_NAME), inside=model_dir)
    if text is None:
        return latest
    try:
        recorded = json_text.loads(text, SPEC_BYTES)
    except json_text.NotJson:
        recorded = {}
    if not isinstance(recorded, dict):
        recorded = {}
    differences = [
        f"its {key} {_shown(recorded.get(key))}, this run's {_shown(spec.get(key))}"
        for key in COMPARED
        if recorded.get(key) != spec.get(key)
    ]
    if differences:
        raise ModelDirError.of(model_dir, f"another model ({'; '.join(differences)})")
    return latest


def record(model_dir: str, spec: dict, **noted) -> None:
    """Writes MODEL_DIR/model.json: `spec` (compared by later runs) and `noted` (for people)."""
    tf.io.gfile.makedirs(model_dir)
    with tf.io.gfile.GFile(tf.io.gfile.join(model_dir, SPEC_NAME), "w") as f:
        f.write(json.dumps({**spec, **noted}, indent=2, sort_keys=True) + "\n")


def _shown(value) -> str:
    """A recorded value in a message: a list or a dict as its length and its items, cut short."""
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple, dict)):
        items = [f"{k}: {v}" for k, v in value.items()] if isinstance(value, dict) else list(map(str, value))
        text = ", ".join(items)
        return f"{len(items)} ({text if len(text) <= _SHOWN_CHARACTERS else text[: _SHOWN_CHARACTERS - 3] + '...'})"
    return repr(value) if isinstance(value, str) else str(value)
