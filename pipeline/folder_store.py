"""A `convert` output folder: what in it belongs to which run, and publishing a run there so that a
reader always finds either the previous complete dataset or the new one.

    OUTPUT/manifest.json                 the commit point: the dataset is what it names
    OUTPUT/<split>-SSSSS-of-NNNNN.tfrecord.gz, errors-00000-of-00001.jsonl (pipeline.contract.layout)
    OUTPUT/.staging-<run>/               a rerun's files, beside a committed dataset
    OUTPUT/beam-temp-*/                  Beam's temporary files while a run writes
    OUTPUT/.shard-parts/                 a local run's shard parts while it writes (transforms.shard_parts)
    OUTPUT/.lease                        the run writing now (pipeline.lease)

Into a folder without a committed dataset a run writes in place and commits by writing
manifest.json. A rerun over a committed dataset (--overwrite) writes into `.staging-<run>/`, and
once its shards are read back and trusted: (1) manifest.json names the staged files, (2) they are
copied to their final names (hard links locally, server-side copies on GCS; TFDS metadata, which
names no staging folder, is removed before and rewritten after), (3) manifest.json names those,
(4) everything no manifest names is removed. A crash between any two steps leaves a
manifest.json whose files all exist, plus leftovers that the next run removes (`leftovers`).
"""

from __future__ import annotations

import dataclasses
import logging

from pipeline import storage
from pipeline.contract.layout import (
    MANIFEST_NAME,
    REJECTED_MANIFEST_NAME,
    SHARD_PARTS_FOLDER,
    TEMPORARY_SUFFIX,
    is_dataset_file,
    is_reader_metadata,
    join,
)
from pipeline.contract.manifest import Manifest, ManifestError, read_rejected_manifest
from pipeline.lease import LEASE_NAME
from pipeline.publish import rejected_if_untrusted, with_reader_metadata, write_manifest

_LOG = logging.getLogger(__name__)

STAGING_PREFIX = ".staging-"
BEAM_TEMPORARY_PREFIX = "beam-temp-"  # Beam's FileBasedSink names its temporary folders so
RUN_FOLDER_PREFIXES = (STAGING_PREFIX, BEAM_TEMPORARY_PREFIX, SHARD_PARTS_FOLDER)  # folders only runs write


def committed_manifest(output: str) -> Manifest | None:
    """The manifest of the dataset committed in `output`, or None when there is none."""
    text = storage.read_text(join(output, MANIFEST_NAME))
    return None if text is None else Manifest.from_json(text)


def referenced(manifest: Manifest) -> set[str]:
    """The paths (relative to the folder) that a manifest names, itself included."""
    return {MANIFEST_NAME, *_files(manifest), *manifest.metadata_files}


def leftovers(output: str, committed: Manifest | None, keep: frozenset[str] = frozenset()) -> list[str]:
    """What runs wrote into `output` that the committed manifest does not name: stray shards,
    error reports, manifests (rejected or half-written), staging, Beam temporary and shard-part folders.
    Files nobody but a run writes there; other files in the folder are never touched. Folders are
    returned whole unless the manifest names something inside (a crash between commit steps)."""
    named = (referenced(committed) if committed else set()) | set(keep)
    found = []
    prefix = output.rstrip("/") + "/"
    for top in storage.children(output):  # empty local folders too
        if top.startswith(RUN_FOLDER_PREFIXES):
            if any(n.startswith(top + "/") for n in named):
                inside = storage.files_below(join(output, top))
                found += [p for p in inside if p[len(prefix) :] not in named]
            else:
                found.append(join(output, top))
        elif top not in named and _written_by_runs(top):
            found.append(join(output, top))
    return sorted(found)


def _written_by_runs(name: str) -> bool:
    """Shards, error reports and manifests, and half-written temporary copies of those and of the
    lease (never the lease itself: the run holding it removes it)."""
    stem = name.removesuffix(TEMPORARY_SUFFIX)
    return is_dataset_file(stem) or stem == REJECTED_MANIFEST_NAME or name == LEASE_NAME + TEMPORARY_SUFFIX


def remove(paths: list[str]) -> None:
    """Deletes files and run folders (as `leftovers` returns them)."""
    folders = [p for p in paths if storage.basename(p).startswith(RUN_FOLDER_PREFIXES)]
    for folder in folders:
        storage.delete_folder(folder)
    storage.delete([p for p in paths if p not in folders])


def _relocated(manifest: Manifest, subfolder: str) -> Manifest:
    """The manifest with its files named inside `subfolder`."""
    splits = {
        name: dataclasses.replace(
            split,
            shards=tuple(join(subfolder, s) for s in split.shards),
            index_files=tuple(join(subfolder, s) for s in split.index_files),
        )
        for name, split in manifest.splits.items()
    }
    return dataclasses.replace(
        manifest,
        splits=splits,
        error_files=tuple(join(subfolder, f) for f in manifest.error_files),
        copies_files=tuple(join(subfolder, f) for f in manifest.copies_files),
    )


def _files(manifest: Manifest) -> list[str]:
    """The records' files and the reports beside them that a manifest names."""
    splits = manifest.splits.values()
    return [f for split in splits for f in (*split.shards, *split.index_files)] + list(manifest.report_files)


@dataclasses.dataclass(frozen=True)
class FolderPublication:
    """`convert`'s Publication (pipeline.publish). `staged`: a committed dataset is being replaced,
    so the job writes into OUTPUT/.staging-<run>/ and the commit steps above move it in."""

    output: str
    run: str
    staged: bool = False
    unattended: bool = False  # a template launch: no launcher waits to report a rejection

    @property
    def folder(self) -> str:
        return join(self.output, STAGING_PREFIX + self.run) if self.staged else self.output

    def publish(self, manifest: Manifest) -> None:
        if rejected_if_untrusted(manifest, self.folder, self.output, self.run, self.unattended):
            return
        if not self.staged:
            write_manifest(self.output, with_reader_metadata(self.output, manifest))
            return
        staged = _relocated(manifest, STAGING_PREFIX + self.run)
        write_manifest(self.output, staged)
        # The previous TFDS metadata describes the shards about to be replaced: a TFDS reader
        # finds none until the new one is written.
        remove([p for p in leftovers(self.output, staged) if is_reader_metadata(storage.basename(p))])
        for name in _files(manifest):
            storage.copy(join(self.folder, name), join(self.output, name))
        manifest = with_reader_metadata(self.output, manifest)
        write_manifest(self.output, manifest)
        remove(leftovers(self.output, manifest))
        _LOG.info("replaced the dataset in %s", self.output)

    def clean_up_failed(self) -> Manifest | None:
        """Removes what this run wrote, keeping a committed manifest (it may have committed before
        failing) and a rejected run's report; returns the rejected manifest."""
        try:
            committed = committed_manifest(self.output)
        except ManifestError:
            committed = None
        if committed is not None and committed.run == self.run:
            remove(leftovers(self.output, committed))
            return None
        rejected = read_rejected_manifest(self.folder, storage.read_text)
        ours = rejected is not None and rejected.run == self.run
        keep = {REJECTED_MANIFEST_NAME, *rejected.report_files} if ours else set()
        if self.staged:
            keep = {join(STAGING_PREFIX + self.run, name) for name in keep}
            remove([p for p in leftovers(self.output, committed, frozenset(keep)) if self.run in p])
        else:
            remove(leftovers(self.output, committed, frozenset(keep)))
        return rejected if keep else None
