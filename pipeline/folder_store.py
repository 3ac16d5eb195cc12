"""A `convert` output folder: what in it belongs to which run, and publishing a run there so that a
reader always finds either the previous complete dataset or the new one, and no other run's files
are ever touched.

    OUTPUT/manifest.json                 the commit point: the dataset is what it names
    OUTPUT/<split>-SSSSS-of-NNNNN.tfrecord.gz, errors-00000-of-00001.jsonl (core.contract.layout)
    OUTPUT/index/<shard>.idx             with `index: true`
    OUTPUT/.staging-<run>/               everything a run writes until it commits: names only it uses
    OUTPUT/.lease                        the run writing now (pipeline.lease)

A run writes only into its own `.staging-<run>/` (made exclusively: a folder or link already there
stops the run) until it commits. Every step that touches OUTPUT's other names runs inside the
run's lease Fence (pipeline.lease), so a run that lost its lease touches nothing. Committing:
into a folder without a dataset, the staged files are copied to their final names (hard links
locally, server-side composes on GCS), then manifest.json is written. Over a committed dataset
(--overwrite): (1) manifest.json names the staged files, (2) they are copied to their final names
(TFDS metadata, which names no staging folder, is removed before and rewritten after), (3)
manifest.json names those, (4) the files only the previous manifest named, and the staging folder,
are removed. A crash between any two steps leaves a manifest.json whose files all exist, plus
leftovers that the next run removes (`leftovers`).

Every delete names one file: one this run wrote, one a manifest of OUTPUT names, or a leftover a
literal listing of OUTPUT (and of its index folder) finds under a name only runs write. A link
planted under a run folder's name is reported and left alone; nothing is written or deleted below
an index folder that is a link (pipeline.output refuses the run before it starts).
"""

from __future__ import annotations

import dataclasses
import logging

from core import local_writes, storage
from core.contract.layout import (
    INDEX_FOLDER,
    MANIFEST_NAME,
    REJECTED_MANIFEST_NAME,
    SHARD_PARTS_FOLDER,
    is_dataset_file,
    is_index_file,
    is_remote,
    join,
    temporary_of,
)
from core.contract.manifest import Manifest, ManifestError, read_committed_manifest, read_rejected_manifest
from pipeline.lease import LEASE_NAME, Fence
from pipeline.publish import reader_metadata, report_rejection, write_rejection

_LOG = logging.getLogger(__name__)

STAGING_PREFIX = ".staging-"
BEAM_TEMPORARY_PREFIX = "beam-temp-"  # Beam's file sinks' folders, from runs of earlier versions
RUN_FOLDER_PREFIXES = (STAGING_PREFIX, BEAM_TEMPORARY_PREFIX, SHARD_PARTS_FOLDER)  # folders only runs write


def committed_manifest(output: str) -> Manifest | None:
    """The manifest of the dataset committed in `output`, or None when there is none."""
    return read_committed_manifest(output, storage.read_text)


def referenced(manifest: Manifest) -> set[str]:
    """The paths (relative to the folder) that a manifest names, itself included."""
    return {MANIFEST_NAME, *_files(manifest), *manifest.metadata_files}


def leftovers(output: str, committed: Manifest | None) -> list[str]:
    """What runs wrote into `output` that the committed manifest does not name: stray shards,
    error reports, manifests (rejected or half-written), temporary files, staging folders (and
    the Beam temporary and shard-part folders of older versions), from one literal listing of
    `output`'s top level. Other files in the folder are never touched. A run folder is returned
    whole unless the manifest names something inside it (a crash between commit steps)."""
    named = referenced(committed) if committed else set()
    found = []
    prefix = output.rstrip("/") + "/"
    for top in storage.children(output):  # empty local folders too
        if top.startswith(RUN_FOLDER_PREFIXES):
            if any(n.startswith(top + "/") for n in named):
                inside = storage.files_below(join(output, top))
                found += [p for p in inside if p[len(prefix) :] not in named]
            else:
                found.append(join(output, top))
        elif top == INDEX_FOLDER:
            found += [p for p in _index_files(output) if p[len(prefix) :] not in named]
        elif top not in named and _written_by_runs(top):
            found.append(join(output, top))
    return sorted(found)


def not_from_runs(output: str) -> list[str]:
    """The names at `output`'s top level that no run writes, hidden ones aside (every run folder
    and the lease are hidden; so are `.gitkeep` and `.DS_Store`): the user's own files and
    folders, never touched, which a dataset written in among them would mix with."""
    return [
        name
        for name in storage.children(output)
        if not name.startswith(".")
        and name != INDEX_FOLDER
        and not name.startswith(RUN_FOLDER_PREFIXES)
        and not _written_by_runs(name)
    ]


def _index_files(output: str) -> list[str]:
    """The shards' index files in OUTPUT's index folder (none below a link in its place)."""
    if not is_remote(output) and not local_writes.real_folder(join(output, INDEX_FOLDER), make=False):
        return []
    return [p for p in storage.files_below(join(output, INDEX_FOLDER)) if is_index_file(storage.basename(p))]


def _in_real_folders(output: str, names, make: bool) -> list[str]:
    """`names` (relative to OUTPUT) whose folders below OUTPUT are real folders, made when missing
    and `make`. A link in a folder's place raises local_writes.LinkOnPath when `make` (a copy or
    write there would land outside OUTPUT); otherwise the names below it are reported and left
    alone (a delete would remove what the link points at)."""
    names = list(names)
    if is_remote(output):
        return names
    real: dict[str, bool] = {"": True}
    for folder in sorted({a for name in names for a in _ancestors(name)}, key=lambda folder: folder.count("/")):
        try:
            real[folder] = real[_folder(folder)] and local_writes.real_folder(join(output, folder), make)
        except local_writes.LinkOnPath:
            if make:
                raise
            _LOG.warning("%s is a symbolic link where a dataset's folder would be: left alone", join(output, folder))
            real[folder] = False
    return [name for name in names if real[_folder(name)]]


def _folder(name: str) -> str:
    """The folder part of a relative name ("" for a name directly in its folder)."""
    return name.rsplit("/", 1)[0] if "/" in name else ""


def _ancestors(name: str) -> list[str]:
    """The folders a relative name is below, outermost first (`a/b/c` -> `a`, `a/b`)."""
    parts = name.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _written_by_runs(name: str) -> bool:
    """Shards, error reports and manifests, and temporary copies of those and of the lease (never
    the lease itself: the run holding it removes it)."""
    stands_for = temporary_of(name)
    if stands_for is not None:
        return stands_for == LEASE_NAME or _written_by_runs(stands_for)
    return is_dataset_file(name) or name == REJECTED_MANIFEST_NAME


def remove(paths: list[str], fence: Fence) -> None:
    """Deletes files and run folders (as `leftovers` returns them) behind the run's lease; a run
    folder's name that is a link is reported and left alone."""
    fence.delete([path for path in paths if not storage.basename(path).startswith(RUN_FOLDER_PREFIXES)])
    storage.remove_empty_folders(
        sorted({storage.parent(p) for p in paths if storage.basename(storage.parent(p)) == INDEX_FOLDER})
    )
    for path in paths:
        if storage.basename(path).startswith(RUN_FOLDER_PREFIXES):
            try:
                fence.delete_tree(path)
            except storage.LinkedFolder:
                _LOG.warning("%s is a symbolic link where a run's folder would be: left alone", path)


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
    """`convert`'s Publication (pipeline.publish): the job writes into OUTPUT/.staging-<run>/ and
    `publish` commits it as the module docstring says."""

    output: str
    run: str
    unattended: bool = False  # a template launch: no lease, and no launcher waits to report a rejection

    @property
    def folder(self) -> str:
        return join(self.output, STAGING_PREFIX + self.run)

    def prepare(self) -> None:
        """Makes the run's own folder, which must not exist (a link planted there stops the run);
        a job that runs later (unattended, on Dataflow) writes gs://, which has no folders."""
        if not self.unattended:
            storage.make_folder(self.folder)

    def publish(self, manifest: Manifest) -> None:
        """Commits once per run, however often the step runs: a runner runs it again after it did
        its work (Dataflow, when the worker failed before reporting the bundle done; the FnApiRunner
        under --direct_runner_bundle_repeat), and by then this run's staging folder is gone."""
        with Fence(self.output, self.run, self.unattended) as fence:
            committed = _committed_or_none(self.output)
            if manifest.rejected:
                self._reject(manifest, committed, fence)
            elif committed is None:
                self._commit(manifest, fence)
            elif committed.run == self.run and not self._names_staged_files(committed):
                _LOG.info("%s is committed already", self.output)
            else:
                self._replace(manifest, committed, fence)

    def _names_staged_files(self, committed: Manifest) -> bool:
        """Whether `committed` still names files in this run's staging folder: a commit over a
        dataset stopped between its steps (1) and (3), which a rerun of the step completes."""
        return any(name.startswith(self._staging_name + "/") for name in referenced(committed))

    def _commit(self, manifest: Manifest, fence: Fence) -> None:
        """Into a folder without a dataset: the files, then the manifest that names them."""
        for name in _in_real_folders(self.output, _files(manifest), make=True):
            fence.copy(join(self.folder, name), join(self.output, name))
        manifest = self._with_reader_metadata(manifest, fence)
        fence.write(join(self.output, MANIFEST_NAME), manifest.to_json(), self.folder)
        storage.delete_tree(self.folder)
        _LOG.info("wrote %s", join(self.output, MANIFEST_NAME))

    def _replace(self, manifest: Manifest, committed: Manifest, fence: Fence) -> None:
        """Over a committed dataset: steps (1)-(4) of the module docstring."""
        fence.write(join(self.output, MANIFEST_NAME), _relocated(manifest, self._staging_name).to_json(), self.folder)
        # The previous TFDS metadata describes the shards about to be replaced: a TFDS reader
        # finds none until the new one is written.
        fence.delete([join(self.output, name) for name in committed.metadata_files])
        for name in _in_real_folders(self.output, _files(manifest), make=True):
            fence.copy(join(self.folder, name), join(self.output, name))
        manifest = self._with_reader_metadata(manifest, fence)
        fence.write(join(self.output, MANIFEST_NAME), manifest.to_json(), self.folder)
        replaced = referenced(committed) - referenced(manifest)
        fence.delete([join(self.output, name) for name in _in_real_folders(self.output, sorted(replaced), make=False)])
        storage.remove_empty_folders([join(self.output, INDEX_FOLDER)])
        _remove_emptied_run_folders(self.output, replaced, fence)
        storage.delete_tree(self.folder)
        _LOG.info("replaced the dataset in %s", self.output)

    def _with_reader_metadata(self, manifest: Manifest, fence: Fence) -> Manifest:
        files = reader_metadata(self.output, manifest)
        for name, text in files.items():
            fence.write(join(self.output, name), text, self.folder)
        return dataclasses.replace(manifest, metadata_files=tuple(sorted(files)))

    def _reject(self, manifest: Manifest, committed: Manifest | None, fence: Fence) -> None:
        """An untrusted run: its report (publish.write_rejection) stays in its own folder beside a
        committed dataset, or moves up to OUTPUT, where `inspect` finds it, when there is none."""
        write_rejection(self.folder, manifest)
        where = self.folder
        if committed is None:
            for name in (REJECTED_MANIFEST_NAME, *manifest.report_files):
                fence.copy(join(self.folder, name), join(self.output, name))
            storage.delete_tree(self.folder)
            where = self.output
        report_rejection(where, manifest, fail_job=self.unattended)

    @property
    def _staging_name(self) -> str:
        return STAGING_PREFIX + self.run

    def rejected(self) -> Manifest | None:
        """This run's rejected manifest, wherever `publish` left it; None when there is none."""
        for folder in (self.folder, self.output):
            try:
                found = read_rejected_manifest(folder, storage.read_text)
            except ManifestError:
                continue
            if found is not None and found.run == self.run:
                return found
        return None

    def clean_up_failed(self) -> Manifest | None:
        """After a failed job: removes what this run wrote (its own folder), keeping a rejected
        run's report and whatever a committed manifest names; returns the rejected manifest."""
        committed = _committed_or_none(self.output)
        named = referenced(committed) if committed else set()
        rejected = self.rejected()
        own = (REJECTED_MANIFEST_NAME, *rejected.report_files) if rejected else ()
        keep = named | {join(self._staging_name, name) for name in own}
        if not any(name.startswith(self._staging_name + "/") for name in keep):
            try:
                storage.delete_tree(self.folder)
            except storage.LinkedFolder:
                _LOG.warning("%s is a symbolic link, not this run's folder: left alone", self.folder)
        else:
            prefix = self.output.rstrip("/") + "/"
            storage.delete([p for p in storage.files_below(self.folder) if p[len(prefix) :] not in keep])
        return rejected


def _committed_or_none(output: str) -> Manifest | None:
    try:
        return committed_manifest(output)
    except ManifestError:
        return None


def _remove_emptied_run_folders(output: str, removed: set[str], fence: Fence) -> None:
    """Run folders whose named files a commit removed (a staging folder a crash left named)."""
    folders = {name.split("/", 1)[0] for name in removed if "/" in name}
    remove([join(output, folder) for folder in sorted(folders) if folder.startswith(RUN_FOLDER_PREFIXES)], fence)
