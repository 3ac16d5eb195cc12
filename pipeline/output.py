"""Preparing a `convert` output folder once the run holds its lease: refusing to replace a committed
dataset without --overwrite, removing what earlier runs left behind, and deciding whether the run
writes in place or beside the committed dataset (pipeline.folder_store)."""

from __future__ import annotations

import logging

from pipeline import storage
from pipeline.contract.layout import is_dataset_file
from pipeline.contract.manifest import ManifestError, read_rejected_manifest
from pipeline.folder_store import committed_manifest, leftovers, remove
from pipeline.lease import Holder

_LOG = logging.getLogger(__name__)


class OutputExistsError(RuntimeError):
    pass


def prepare_output(output: str, overwrite: bool, took_over: Holder | None) -> bool:
    """Returns True when a committed dataset stays in place until the new run replaces it (the run
    is staged). `took_over`: the dead run whose stale lease this run took, whose files may go.

    Runs' temporary and staging folders, a rejected run and a dead run's files are removed;
    shards without any manifest from an unknown writer are removed only with `overwrite`."""
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
    owned = took_over is not None or read_rejected_manifest(output, storage.read_text) is not None
    if committed is None and unfinished and not (owned or overwrite):
        raise OutputExistsError(
            f"{output} holds files of an unfinished dataset with no manifest.json, e.g. "
            f"{storage.basename(unfinished[0])}; pass --overwrite to remove them"
        )
    if stray:
        _LOG.info("removing %d file(s) and folder(s) that earlier runs left in %s", len(stray), output)
        remove(stray)
    return committed is not None
