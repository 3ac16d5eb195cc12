"""Clearing a previous dataset from the output folder before a rerun."""

from __future__ import annotations

import logging

from pipeline import storage
from pipeline.contract.layout import is_dataset_file, join

_LOG = logging.getLogger(__name__)


class OutputExistsError(RuntimeError):
    pass


def dataset_files(output: str) -> list[str]:
    """Files directly in `output` that a conversion writes (shards, error reports, manifest)."""
    return sorted(m.path for m in storage.match(join(output, "*")) if is_dataset_file(storage.basename(m.path)))


def prepare_output(output: str, overwrite: bool) -> None:
    """Refuse to mix a new dataset with an old one; with `overwrite`, delete the old one first
    (only the files a conversion writes, nothing else in the folder)."""
    existing = dataset_files(output)
    if not existing:
        return
    if not overwrite:
        raise OutputExistsError(
            f"{output} already holds a dataset ({len(existing)} file(s), e.g. "
            f"{storage.basename(existing[0])}); pass --overwrite to replace it"
        )
    _LOG.info("deleting %d file(s) of the previous dataset in %s", len(existing), output)
    storage.delete(existing)
