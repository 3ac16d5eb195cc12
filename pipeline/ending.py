"""How a command ends: its exit code, and a last line that says what its output holds, read from
the output as the command ends, never assumed from how far the run got.

Every command's end goes through `end` (pipeline.cli.run): the code it returns, or the error that
ended it. An error that ends a run also says what DEST holds (`Outcome`, read by `dataset_outcome`
or `version_outcome` when the run ends): its new dataset, whole, when it ended only after its
commit point; the previous one; another run's, when it lost its lease and that run committed; or
none. SIGTERM (a scheduler stopping the job, `kill`, `docker stop`) ends a run as Ctrl-C does
(`Terminated`): the run's threads stop, what it wrote is removed, its lease is released, so a
retry is not refused; only the exit code differs. Exit codes:

    0    committed (or nothing to do)                      pipeline.job
    1    finished, but rejected                             pipeline.job
    2    refused before any work                            pipeline.job
    3    failed while running (or after its commit point)   pipeline.job
    4    a refresh's version committed but held (drifted)   pipeline.job
    130  interrupted by Ctrl-C (128 + SIGINT)               EXIT_INTERRUPTED
    143  terminated by SIGTERM (128 + SIGTERM)              EXIT_TERMINATED

tests/test_endings.py fails when a module ends the process another way (sys.exit, os._exit,
SystemExit, a SIGTERM handler of its own) or a command returns a code that is none of these.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Iterator

from core import storage
from core.contract.folders import folder_kind
from core.contract.layout import STAGING_PREFIX, join
from core.contract.manifest import Manifest, ManifestError, read_manifest
from pipeline.folder_store import referenced
from pipeline.job import EXIT_FAILED
from pipeline.report import first_line
from transforms import stopping

_LOG = logging.getLogger("pipeline")

EXIT_INTERRUPTED = 130  # a shell's code for a command stopped by Ctrl-C (128 + SIGINT)
EXIT_TERMINATED = 143  # a shell's code for a command stopped by SIGTERM (128 + SIGTERM), as schedulers expect
INTERRUPTED, TERMINATED = "interrupted (Ctrl-C)", "terminated (SIGTERM)"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that a terminated run
    ends through the same clean-up: its threads stop, what it wrote goes, its lease is released."""

    def __init__(self, message: str = TERMINATED):
        super().__init__(message)


@contextlib.contextmanager
def terminations_end_the_run() -> Iterator[None]:
    """Within it, SIGTERM raises Terminated in the main thread, after raising the stop flag that
    a local run's threads check (transforms.stopping). Off the main thread no handler can be set:
    SIGTERM keeps its default there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        stopping.request_stop()
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def end(ended: int | BaseException) -> int:
    """The exit code of a command that returned `ended` or was ended by it, its one line logged
    for an error: an interrupt's own words (a run's say what DEST holds: `saying_what_dest_holds`),
    any other error's type and first words."""
    if isinstance(ended, int):
        return ended
    if isinstance(ended, KeyboardInterrupt):
        terminated = _terminated(ended)
        _LOG.error("%s", str(ended) or (TERMINATED if terminated else INTERRUPTED))
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    # Its lines joined here (first_line), as a record's arguments are escaped whole (core.shown)
    # before pipeline.cli.OneLine reads the message; exc_info: OneLine says --debug shows the rest.
    _LOG.error("%s: %s", type(ended).__name__, first_line(str(ended).strip() or "(no message)"), exc_info=ended)
    return EXIT_FAILED


def _terminated(error: BaseException | None) -> bool:
    """Whether SIGTERM is what ended the run: `error` or an error it was raised from or during."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, Terminated):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a run's output holds as the run ends, read from it: `committed` when it is this run's
    dataset (it ended only after its commit point)."""

    committed: bool
    holds: str

    def line(self, how: str, run: str) -> str:
        """The run's last line: `how` it ended (`terminated (SIGTERM)`, the reasons it failed; ""
        for a rejection, whose report says why), and what its output holds."""
        if self.committed:
            return f"{how or 'ended'}, only after the run committed: {self.holds}"
        return f"{how + '; ' if how else ''}run {run} not published; {self.holds}"


def dataset_outcome(output: str, run: str, previous: str | None) -> Outcome:
    """What the `convert` output holds once run `run` ends; `previous`: the run whose dataset was
    there when it began."""
    try:
        manifest = _manifest(output)
    except ManifestError as e:
        return Outcome(False, f"{output} holds a manifest that cannot be read ({e})")
    if manifest is None:
        return Outcome(False, f"{output} holds no dataset")
    if manifest.run == run:
        staged = sorted(name for name in referenced(manifest) if name.startswith(STAGING_PREFIX))
        where = (
            f", its files still in {join(output, staged[0].split('/')[0])} (the next run into {output} moves them in)"
            if staged
            else ", whole"
        )
        return Outcome(True, f"{output} holds its new dataset{where} ({manifest.records} records, run {run})")
    if manifest.run == previous:
        return Outcome(False, f"the previous dataset in {output} is unchanged ({manifest.records} records)")
    return Outcome(
        False,
        f"{output} holds the dataset of run {manifest.run} ({manifest.records} records, created {manifest.created}), "
        "another run's",
    )


def version_outcome(root: str, run: str, previous: str | None = None) -> Outcome:
    """What the refresh ROOT publishes once run `run` ends; `previous`: the version LATEST named
    when it began, when known."""
    latest = folder_kind(root, storage.text_reader(root), storage.children).latest
    if latest is None:
        return Outcome(False, f"{root}/LATEST names no version")
    if latest == previous:
        return Outcome(False, f"{root}/LATEST still names {latest}")
    try:
        manifest = _manifest(join(root, latest))
    except ManifestError as e:
        return Outcome(False, f"{root}/LATEST names version {latest}, whose manifest cannot be read ({e})")
    if manifest is not None and manifest.run == run:
        return Outcome(
            True, f"{root}/LATEST names its new version {latest}, whole ({manifest.records} records, run {run})"
        )
    made = f"{manifest.records} records, run {manifest.run}" if manifest else "no manifest"
    return Outcome(False, f"{root}/LATEST names version {latest} ({made})")


@contextlib.contextmanager
def saying_what_dest_holds(outcome: Callable[[], Outcome], run: str) -> Iterator[None]:
    """An interrupt (Ctrl-C, SIGTERM, either during the clean-up) that ends the run within it ends
    with one line that says how, and what DEST holds then (`outcome`). Of the same type, so the
    run's lease (pipeline.lease) and `end` tell them apart."""
    try:
        yield
    except KeyboardInterrupt as e:
        how = str(e) or (TERMINATED if _terminated(e) else INTERRUPTED)
        try:
            line = outcome().line(how, run)
        except Exception as unread:  # the line without what DEST holds, rather than a traceback
            line = f"{how}: what {run}'s output holds could not be read ({unread})"
        raise type(e)(line) from e


def _manifest(folder: str) -> Manifest | None:
    """The committed manifest of the dataset folder `folder`, as folder_kind finds it."""
    if not folder_kind(folder, storage.text_reader(folder), storage.children).committed:
        return None
    return read_manifest(folder, storage.text_reader(folder))
