"""The planner's classified listing, handed to the job's listing step when both run here.

A run lists its input twice: the planner, before the job, to size the shards, and the job's
first step, inside the pipeline, so that on Dataflow the graph stays the same size for ten or ten
million files. A local runner runs that step in the planner's own process, where listing and
classifying again only costs time (README, Performance), and could see input the plan did not.
So the planner keeps what it classified here (`keep`), and the step takes it (`take`) by the key
the plan carries: Beam pickles each step with its arguments, and a key pickles in no time where a
listing did not.

A step that runs in another process (the parallel runner's worker processes, Dataflow) finds
nothing under the key and lists, as without a hand-over. One listing is kept at a time: a later
plan's replaces it, and the job forgets it when it ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from transforms.outcomes import DeadLetter, Skipped, Source

_KEPT: dict[str, tuple[Source | Skipped | DeadLetter, ...]] = {}


def keep(outcomes: Iterable[Source | Skipped | DeadLetter]) -> str:
    """Keeps the listing's outcomes (replacing any kept before) under a new key, returned."""
    key = uuid.uuid4().hex
    _KEPT.clear()
    _KEPT[key] = tuple(outcomes)
    return key


def take(key: str | None) -> tuple[Source | Skipped | DeadLetter, ...] | None:
    """The outcomes kept under `key` in this process, or None. They stay kept: a step that fails
    and runs again takes them again."""
    return _KEPT.get(key) if key else None


def forget() -> None:
    """Drops the kept listing (its job has ended)."""
    _KEPT.clear()
