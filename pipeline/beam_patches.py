"""The one switch for the two places this process changes Beam to start faster.

Both patches lean on internals of the Beam release they were written and tested against
(CHECKED_BEAM): which of its integrations Beam imports only inside `try ... except ImportError`
(pipeline.unused_modules), and that two of its lookups are pure (pipeline.beam_lookups). A run
works without them, only slower to start (docs/performance.md), so they turn themselves off,
with one warning, on any other Beam release, and `TFRECORD_BEAM_PATCHES=off` turns them off by
hand: to try a Beam upgrade, or to tell whether a problem is theirs. The process entry
(pipeline.__main__) applies them, and nothing else: a pipeline built from any other entry (the
Flex Template launcher, a test) meets Beam as it is.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os

from pipeline.unused_modules import leave_out_unless_needed

SWITCH = "TFRECORD_BEAM_PATCHES"
OFF = ("off", "0", "false", "no")
CHECKED_BEAM = "2.77"  # major.minor: the release whose internals both patches were checked against
_LOG = logging.getLogger(__name__)


def switched_on() -> bool:
    """Whether the environment leaves the patches on, as it does unless SWITCH says off."""
    return os.environ.get(SWITCH, "on").strip().lower() not in OFF


@functools.cache
def fit_this_beam() -> bool:
    """Whether the installed Beam is the release the patches were checked against; says once
    why not. Asks the installation, so that Beam need not be imported to know."""
    version = importlib.metadata.version("apache-beam")
    if version.split(".")[:2] == CHECKED_BEAM.split("."):
        return True
    _LOG.warning(
        "Beam %s: its start-up patches were checked against Beam %s only, so this run goes without them "
        "(slower to start); see %s in pipeline/beam_patches.py",
        version,
        CHECKED_BEAM,
        SWITCH,
    )
    return False


def wanted() -> bool:
    """Whether this process patches Beam: switched on, and Beam the release they fit."""
    return switched_on() and fit_this_beam()


def apply(argv: list[str]) -> None:
    """Patches Beam in this process, for the command line `argv`, unless not wanted(): leaves out
    the modules it cannot need, then has it work out its repeated lookups once. First thing in the
    process: nothing may have imported Beam yet."""
    if not wanted():
        return
    leave_out_unless_needed(argv)
    from pipeline.beam_lookups import remember_lookups  # imports Beam: only once the above is decided

    remember_lookups()
