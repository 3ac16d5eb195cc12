"""Preparing a `convert` output folder once the run holds its lease: refusing to replace a committed
dataset without --overwrite, and removing what earlier runs left behind (pipeline.folder_store),
inside the run's lease Fence (pipeline.lease)."""

from __future__ import annotations

import logging

from core import local_writes, storage
from core.contract.layout import INDEX_FOLDER, is_dataset_file, is_remote, join
from core.contract.manifest import ManifestError, read_rejected_manifest
from core.local_files import LeadsOutside, NotARegularFile
from pipeline.folder_store import committed_manifest, leftovers, remove
from pipeline.lease import Fence, Holder

_LOG = logging.getLogger(__name__)


class OutputExistsError(RuntimeError):
    pass


def prepare_output(output: str, run: str, overwrite: bool, took_over: Holder | None, unattended: bool) -> bool:
    """Returns True when a committed dataset stays in place until run `run` replaces it.
    `took_over`: the dead run whose stale lease this run took, whose files may go.

    Runs' temporary and staging folders, a rejected run and a dead run's files are removed;
    shards without any manifest from an unknown writer are removed only with `overwrite`. A link
    in the place of the dataset's index folder stops the run (pipeline.folder_store)."""
    with Fence(output, run, unattended) as fence:
        return _prepare(output, overwrite, took_over, fence)


def _prepare(output: str, overwrite: bool, took_over: Holder | None, fence: Fence) -> bool:
    if not is_remote(output):
        try:
            local_writes.real_folder(join(output, INDEX_FOLDER), make=False)
        except local_writes.LinkOnPath as e:
            raise OutputExistsError(f"{e.filename}: {e.strerror}; remove it to write a dataset here") from e
    try:
        committed = committed_manifest(output)
    except ManifestError as e:
        if not overwrite:
            raise OutputExistsError(f"{e}; pass --overwrite to replace what is there") from e
        committed = None
    if committed is not None and not overwrite:
        raise OutputExistsError(
            f"{output} already holds a dataset ({committed.counts.written} records, created {committed.created}); "
            "pass --overwrite to replace it (it stays readable until the new run is verified)"
        )
    stray = leftovers(output, committed)
    unfinished = [p for p in stray if is_dataset_file(storage.basename(p)) and storage.parent(p) == output]
    owned = took_over is not None or _rejected_run_here(output)
    if committed is None and unfinished and not (owned or overwrite):
        raise OutputExistsError(
            f"{output} holds files of an unfinished dataset with no manifest.json, e.g. "
            f"{storage.basename(unfinished[0])}; pass --overwrite to remove them"
        )
    if stray:
        _LOG.info("removing %d file(s) and folder(s) that earlier runs left in %s", len(stray), output)
        remove(stray, fence)
    return committed is not None


def _rejected_run_here(output: str) -> bool:
    """Whether `output` holds a rejected run's manifest (one that cannot be read is not one, nor is
    a link out of `output` or a FIFO planted under its name: core.local_files.open_regular)."""
    try:
        return read_rejected_manifest(output, storage.text_reader(output)) is not None
    except (ManifestError, LeadsOutside, NotARegularFile):
        return False
