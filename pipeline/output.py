"""Preparing a `convert` output folder once the run holds its lease: refusing to replace a committed
dataset without --overwrite, and a run that would write over a file no run can be shown to have
written; finishing a commit that an earlier run began; removing what earlier runs left behind
(pipeline.folder_store), inside the run's lease Fence (pipeline.lease)."""

from __future__ import annotations

import logging

from core import local_writes, storage
from core.contract.layout import INDEX_FOLDER, MANIFEST_NAME, REJECTED_MANIFEST_NAME, STAGING_PREFIX, is_remote, join
from core.contract.manifest import Manifest, ManifestError
from core.evidence import below
from pipeline.folder_store import committed_manifest, is_staging_folder, leftovers, move_in, referenced
from pipeline.lease import Fence

_LOG = logging.getLogger(__name__)


class OutputExistsError(RuntimeError):
    pass


def prepare_output(output: str, run: str, overwrite: bool, writes: set[str], unattended: bool) -> Manifest | None:
    """Returns the manifest of the committed dataset that stays in place until run `run` replaces
    it (None when there is none). `writes`:
    the names the run may write in `output` (folder_store.names_written).

    A commit an earlier run stopped between its steps is finished (folder_store.move_in); runs'
    staging folders, a rejected run's files and the copies a dead run made go (folder_store.
    leftovers). A file that nothing proves a run's is the user's, whatever its name: it is never
    removed, and the run is refused when it would write under that name. A link in the place of the
    dataset's index folder stops the run."""
    with Fence(output, run, unattended) as fence:
        return _prepare(output, overwrite, writes, fence)


def _prepare(output: str, overwrite: bool, writes: set[str], fence: Fence) -> Manifest | None:
    if not is_remote(output):
        try:
            local_writes.real_folder(join(output, INDEX_FOLDER), make=False)
        except local_writes.LinkOnPath as e:
            raise OutputExistsError(f"{e.filename}: {e.strerror}; remove it to write a dataset here") from e
    try:
        committed = committed_manifest(output)
    except ManifestError as e:
        raise OutputExistsError(
            f"{e}: it is not a manifest this pipeline wrote, and a run writes its manifest under that name; move "
            "it away (with the dataset files it named, if it is a damaged one), or choose another --output"
        ) from e
    if committed is not None and not overwrite:
        raise OutputExistsError(
            f"{output} already holds a dataset ({committed.counts.written} records, created {committed.created}); "
            "pass --overwrite to replace it (it stays readable until the new run is verified)"
        )
    committed = _finish_commit(output, committed, fence)
    stray = leftovers(output, committed)
    mine = referenced(committed) if committed else set()
    taken = sorted(_present(output, writes - ({REJECTED_MANIFEST_NAME} if committed else set())) - mine)
    taken = [name for name in taken if join(output, name) not in stray.paths]
    if taken:
        more = f" and {len(taken) - 1} more such name(s)" if len(taken) > 1 else ""
        raise OutputExistsError(
            f"{output} holds {join(output, taken[0])}{more}, which no manifest of a run here names, under a name "
            "this run writes: move it away (if an earlier release of this pipeline left it, delete it), or "
            "choose another --output"
        )
    if stray.paths:
        _LOG.info("removing %d file(s) and folder(s) that earlier runs left in %s", len(stray.paths), output)
        stray.remove(fence)
    return committed


def _finish_commit(output: str, committed: Manifest | None, fence: Fence) -> Manifest | None:
    """The committed manifest, once the commit that wrote it is finished: one that names files in
    a run's staging folder was stopped between its steps (1) and (3), and that folder keeps the
    manifest it commits (folder_store.move_in)."""
    staged = {name.split("/")[0] for name in referenced(committed)} if committed else set()
    folders = sorted(filter(is_staging_folder, staged))
    if not folders or not storage.exists(join(join(output, folders[0]), MANIFEST_NAME)):
        return committed
    _LOG.info("finishing the commit run %s began in %s", folders[0][len(STAGING_PREFIX) :], output)
    return move_in(output, folders[0][len(STAGING_PREFIX) :], fence)


def _present(output: str, names: set[str]) -> set[str]:
    """Which of `names` (relative to `output`, some in its index folder) are there, from a listing
    of the two folders."""
    there = set(storage.children(output))
    if any(name.startswith(INDEX_FOLDER + "/") for name in names):
        there |= {below(path, output) for path in storage.files_below(join(output, INDEX_FOLDER))}
    return names & there
