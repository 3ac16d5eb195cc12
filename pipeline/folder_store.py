"""A `convert` output folder: what in it belongs to which run, and publishing a run there so that a
reader always finds either the previous complete dataset or the new one, and no other run's files
are ever touched.

    OUTPUT/manifest.json                 the commit point: the dataset is what it names
    OUTPUT/<split>-SSSSS-of-NNNNN.tfrecord.gz, errors-00000-of-00001.jsonl (core.contract.layout)
    OUTPUT/index/<shard>.idx             with `index: true`
    OUTPUT/.staging-<run>/               everything a run writes until it commits: names only it uses
    OUTPUT/.staging-<run>/manifest.json  the manifest it commits (by final names), before a file moves
    OUTPUT/.staging-<run>/manifest.replaced.json   over a committed dataset: the manifest it replaces
    OUTPUT/.lease                        the run writing now (pipeline.lease)

A run writes only into its own `.staging-<run>/` (made exclusively: a folder or link already there
stops the run) until it commits. Every step that touches OUTPUT's other names runs inside the
run's lease Fence (pipeline.lease), so a run that lost its lease touches nothing. Committing: the
run first writes into its folder the manifest it commits, its TFDS metadata and, over a committed
dataset, the manifest it replaces. Into a folder without a dataset, the staged files are then
copied to their final names (hard links locally, server-side composes on GCS) and manifest.json is
written. Over a committed dataset (--overwrite): (1) manifest.json names the staged files, (2) the
replaced TFDS metadata goes and the staged files are copied to their final names, (3)
manifest.json names those, (4) the files only the replaced manifest named, and the staging folder,
are removed (`move_in`). A crash between any two steps leaves a manifest.json whose files all
exist, plus leftovers that the next run removes; a run stopped between (1) and (3) finishes the
steps in its clean-up, or the next run does (pipeline.output), so manifest.json names no run's
staging folder for longer than a commit takes.

A name is never a run's for its shape (core.evidence): what runs left (`leftovers`) is a staging
folder under a run's name, and the files a manifest of OUTPUT names: a rejected run's, or one a
staging folder keeps (copies a run made before it died, files a replaced manifest named). Every
other name in OUTPUT is the user's (`not_from_runs`), however it is spelt, and is never deleted; a
run that would write over one is refused before it starts (pipeline.output). A link planted under
a run folder's name is reported and left alone; nothing is written or deleted below a folder that
is a link (core.storage.delete; pipeline.output refuses a link in the index folder's place).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from core import local_writes, storage
from core.contract.layout import (
    COPIES_PREFIX,
    ERROR_FILES,
    ERRORS_PREFIX,
    INDEX_FOLDER,
    MANIFEST_NAME,
    REJECTED_MANIFEST_NAME,
    STAGING_PREFIX,
    STATISTICS_NAME,
    index_file,
    is_remote,
    join,
)
from core.contract.manifest import (
    Manifest,
    ManifestError,
    read_committed_manifest,
    read_manifest_file,
    read_rejected_manifest,
)
from core.contract.versions import is_run
from core.evidence import Evidence, NamedBy, OwnFolder, RunFolders, below
from core.local_files import LeadsOutside, NotARegularFile
from pipeline.lease import Fence, LeaseLost
from pipeline.planning import Plan
from pipeline.publish import reader_metadata, report_rejection, write_rejection

_LOG = logging.getLogger(__name__)

REPLACED_NAME = "manifest.replaced.json"  # in a run's staging folder: the manifest its commit replaces


def committed_manifest(output: str) -> Manifest | None:
    """The manifest of the dataset committed in `output`, or None when there is none."""
    return read_committed_manifest(output, storage.text_reader(output))


def referenced(manifest: Manifest) -> set[str]:
    """The paths (relative to the folder) that a manifest names, itself included."""
    return {MANIFEST_NAME, *_files(manifest), *manifest.metadata_files}


def is_staging_folder(name: str) -> bool:
    """Whether a name in OUTPUT is a run's staging folder's: `.staging-` and a run's name, which
    nothing but a run makes (core.contract.versions.is_run)."""
    return name.startswith(STAGING_PREFIX) and is_run(name[len(STAGING_PREFIX) :])


def names_written(plan: Plan) -> set[str]:
    """The names (relative to OUTPUT) a run of `plan` may write there: its shards and their
    indexes, its reports, its manifest or rejected manifest. A file of the user's under one of them
    refuses the run (pipeline.output). TFDS metadata is left out where one is in the way (`_intend`)."""
    names = {
        MANIFEST_NAME,
        REJECTED_MANIFEST_NAME,
        STATISTICS_NAME,
        *(ERROR_FILES.name(p, 0, 1) for p in (ERRORS_PREFIX, COPIES_PREFIX)),
    }
    for split, total in plan.shards.items():
        shards = [plan.record_files.name(split, index, total) for index in range(total)]
        names.update(shards)
        if plan.index:
            names.update(index_file(shard) for shard in shards)
    return names


@dataclasses.dataclass(frozen=True)
class Leftovers:
    """What earlier runs left in an output that its committed manifest does not name, in groups,
    each with what proves it theirs (core.evidence), in the order they are to go: the files a
    manifest names before the run folders that hold such manifests (a clean-up stopped halfway
    leaves its evidence)."""

    groups: tuple[tuple[Evidence, tuple[str, ...]], ...] = ()

    @property
    def paths(self) -> list[str]:
        return sorted(path for _, paths in self.groups for path in paths)

    def remove(self, fence: Fence) -> None:
        for because, paths in self.groups:
            fence.delete(list(paths), because)


def leftovers(output: str, committed: Manifest | None) -> Leftovers:
    """What runs wrote into `output` that the committed manifest does not name, from one literal
    listing of its top level: staging folders (whole, unless the manifest names something inside
    one: a commit stopped between its steps), the files a top-level rejected manifest names, and
    those that a staging folder's manifests name (copies a run made before it stopped, files a
    replaced manifest named). Nothing else in the folder is touched, whatever its name."""
    named = referenced(committed) if committed else set()
    present = storage.children(output)
    files, folders = [], []
    for top in filter(is_staging_folder, present):
        folder = join(output, top)
        files += [_named(output, names, path) for names, path in _kept(output, folder, named)]
        if any(name.startswith(top + "/") for name in named):
            inside = tuple(p for p in storage.files_below(folder) if below(p, output) not in named)
            folders.append((RunFolders(output, frozenset([top])), inside))
        else:
            folders.append((RunFolders(output, frozenset([top])), (folder,)))
    rejected = _rejected_or_none(output) if REJECTED_MANIFEST_NAME in present else None
    if rejected is not None:
        names = {REJECTED_MANIFEST_NAME, *rejected.report_files} - named
        files.append(_named(output, names, join(output, REJECTED_MANIFEST_NAME)))
    return Leftovers(tuple(group for group in (*files, *folders) if group[1]))


def _named(output: str, names: set[str], manifest: str) -> tuple[Evidence, tuple[str, ...]]:
    """The files `names` of `output` that the manifest at `manifest` names, as a group of Leftovers,
    with the index folder when some are in it: it goes once they emptied it."""
    return NamedBy(output, frozenset(names), manifest), tuple(join(output, name) for name in _with_folders(names))


def _with_folders(names) -> list[str]:
    """`names` and, last, the index folder when some of them are in it."""
    inside = any(name.startswith(INDEX_FOLDER + "/") for name in names)
    return sorted(names) + [INDEX_FOLDER] * inside


def _kept(output: str, folder: str, named: set[str]) -> list[tuple[set[str], str]]:
    """The names at the top of `output` that the manifests a run keeps in its staging `folder`
    while it commits (module docstring) make that run's to remove, each set with its manifest's
    path: what the replaced manifest named, and of what the committed one names, the copies the
    run made of its staged files (storage.same_file: a file a user put under such a name after
    the run stopped is not one). A manifest that cannot be read proves nothing."""
    found = []
    for name in (MANIFEST_NAME, REPLACED_NAME):
        path = join(folder, name)
        try:
            manifest = _manifest_at(path, folder)
        except (ManifestError, LeadsOutside, NotARegularFile):
            continue
        if manifest is None:
            continue
        names = referenced(manifest) - named - {MANIFEST_NAME}
        if name == MANIFEST_NAME:
            names = {n for n in names if storage.same_file(join(folder, n), join(output, n))}
        found.append((names, path))
    return found


def not_from_runs(output: str) -> list[str]:
    """The names at `output`'s top level that no manifest of it names and no run left (leftovers),
    hidden ones aside (every run folder and the lease are hidden; so are `.gitkeep` and
    `.DS_Store`): the user's own files and folders, never touched, which a dataset written in among
    them would mix with."""
    committed = _committed_or_none(output)
    ours = {name.split("/")[0] for name in referenced(committed)} if committed else set()
    ours |= {below(path, output).split("/")[0] for path in leftovers(output, committed).paths}
    return [name for name in storage.children(output) if not name.startswith(".") and name not in ours]


def _real_folders(output: str, names: list[str]) -> list[str]:
    """`names` (relative to OUTPUT), once their folders below OUTPUT are made, as real folders: a
    link in a folder's place raises local_writes.LinkOnPath (a copy there would land outside)."""
    if not is_remote(output):
        for folder in sorted({a for name in names for a in _ancestors(name)}, key=lambda folder: folder.count("/")):
            local_writes.real_folder(join(output, folder), make=True)
    return names


def _ancestors(name: str) -> list[str]:
    """The folders a relative name is below, outermost first (`a/b/c` -> `a`, `a/b`)."""
    parts = name.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


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
        metadata_files=tuple(join(subfolder, f) for f in manifest.metadata_files),
    )


def _files(manifest: Manifest) -> list[str]:
    """The records' files and the reports beside them that a manifest names."""
    splits = manifest.splits.values()
    return [f for split in splits for f in (*split.shards, *split.index_files)] + list(manifest.report_files)


def move_in(output: str, run: str, fence: Fence) -> Manifest:
    """Commits what run `run` staged (steps (2) to (4) of the module docstring, however many of
    them ran before), from the manifests its staging folder keeps; returns the manifest committed.
    The replaced TFDS metadata goes first, the staged files are copied to their final names,
    manifest.json names them, then the files only the replaced manifest named go, and the staging
    folder."""
    staging_name = STAGING_PREFIX + run
    staging = join(output, staging_name)
    manifest = _manifest_at(join(staging, MANIFEST_NAME), staging)
    if manifest is None:  # kept there before any file moves: only a run that took over removes it
        raise LeaseLost(f"{staging} no longer holds the manifest run {run} commits: another run took over {output}")
    replaced = _manifest_at(join(staging, REPLACED_NAME), staging)
    replaced_names = (
        NamedBy(output, frozenset(referenced(replaced)), join(staging, REPLACED_NAME)) if replaced else None
    )
    if replaced is not None:
        # The previous TFDS metadata describes the shards about to be replaced: a TFDS reader
        # finds none until the new one is copied in.
        fence.delete([join(output, name) for name in replaced.metadata_files], replaced_names)
    for name in _real_folders(output, [*_files(manifest), *manifest.metadata_files]):
        fence.copy(join(staging, name), join(output, name))
    fence.write(join(output, MANIFEST_NAME), manifest.to_json(), staging)
    if replaced is not None:
        gone = referenced(replaced) - referenced(manifest)
        fence.delete([join(output, name) for name in _with_folders(gone)], replaced_names)
        emptied = {name.split("/")[0] for name in gone if "/" in name} - {staging_name}
        emptied = frozenset(filter(is_staging_folder, emptied))  # a commit the replaced one finished (`leftovers`)
        fence.delete([join(output, folder) for folder in sorted(emptied)], RunFolders(output, emptied))
    fence.delete([staging], RunFolders(output, frozenset([staging_name])))
    return manifest


@dataclasses.dataclass(frozen=True)
class FolderPublication:
    """`convert`'s Publication (pipeline.publish): the job writes into OUTPUT/.staging-<run>/ and
    `publish` commits it as the module docstring says."""

    output: str
    run: str
    unattended: bool = False  # a template launch: no lease, and no launcher waits to report a rejection
    job_lease = None  # a conversion's job takes no lease itself (pipeline.job_lease)

    @property
    def folder(self) -> str:
        return join(self.output, self._staging_name)

    def prepare(self) -> None:
        """Makes the run's own folder, which must not exist (a link planted there stops the run);
        a job that runs later (unattended, on Dataflow) writes gs://, which has no folders."""
        if not self.unattended:
            storage.make_folder(self.folder)

    def publish(self, manifest: Manifest, files: Mapping[str, bytes] | None = None) -> None:
        """Commits once per run, however often the step runs: a runner runs it again after it did
        its work (Dataflow, when the worker failed before reporting the bundle done; the FnApiRunner
        under --direct_runner_bundle_repeat), and by then this run's staging folder is gone; or
        after it failed halfway, and then it finishes what it began."""
        with Fence(self.output, self.run, self.unattended) as fence:
            committed = _committed_or_none(self.output)
            if manifest.rejected:
                self._reject(manifest, committed, fence)
            elif committed is not None and committed.run == self.run and not self.names_staged_files(committed):
                _LOG.info("%s is committed already", self.output)
                storage.delete([self.folder], OwnFolder(self.folder))
            else:
                if committed is None or committed.run != self.run:
                    self._intend(manifest, committed, fence, files or {})
                move_in(self.output, self.run, fence)
                if committed is None:
                    _LOG.info("wrote %s", join(self.output, MANIFEST_NAME))
                else:
                    _LOG.info("replaced the dataset in %s", self.output)

    def names_staged_files(self, committed: Manifest) -> bool:
        """Whether `committed` still names files in this run's staging folder: a commit over a
        dataset stopped between its steps (1) and (3), which `move_in` completes."""
        return any(name.startswith(self._staging_name + "/") for name in referenced(committed))

    def _intend(self, manifest: Manifest, committed: Manifest | None, fence: Fence, files: Mapping[str, bytes]) -> None:
        """Keeps in this run's folder what its commit needs and leaves behind: its TFDS metadata
        (none where a file no manifest names is in the way), the manifest it commits and the one it
        replaces. Over a committed dataset, step (1): manifest.json names the staged files."""
        named = referenced(committed) if committed else set()
        metadata = reader_metadata(self.output, manifest)
        in_the_way = sorted(name for name in metadata if name not in named and storage.exists(join(self.output, name)))
        if in_the_way:
            _LOG.warning(
                "%s: no TFDS metadata: %s is a file no manifest here names, left as it is",
                self.output,
                join(self.output, in_the_way[0]),
            )
            metadata = {}
        for name, data in {**files, **metadata}.items():
            storage.write_atomically(join(self.folder, name), data)
        manifest = dataclasses.replace(manifest, metadata_files=tuple(sorted(metadata)))
        if committed is not None:
            storage.write_atomically(join(self.folder, REPLACED_NAME), committed.to_json())
        storage.write_atomically(join(self.folder, MANIFEST_NAME), manifest.to_json())
        if committed is not None:
            fence.write(
                join(self.output, MANIFEST_NAME), _relocated(manifest, self._staging_name).to_json(), self.folder
            )

    def _reject(self, manifest: Manifest, committed: Manifest | None, fence: Fence) -> None:
        """An untrusted run: its report (publish.write_rejection) stays in its own folder beside a
        committed dataset, or moves up to OUTPUT, where `inspect` finds it, when there is none."""
        write_rejection(self.folder, manifest)
        where = self.folder
        if committed is None:
            for name in (REJECTED_MANIFEST_NAME, *manifest.report_files):
                fence.copy(join(self.folder, name), join(self.output, name))
            storage.delete([self.folder], OwnFolder(self.folder))
            where = self.output
        report_rejection(where, manifest, fail_job=self.unattended)

    @property
    def _staging_name(self) -> str:
        return STAGING_PREFIX + self.run

    def rejected(self) -> Manifest | None:
        """This run's rejected manifest, wherever `publish` left it; None when there is none."""
        for folder in (self.folder, self.output):
            try:
                found = read_rejected_manifest(folder, storage.text_reader(self.output))
            except (ManifestError, LeadsOutside, NotARegularFile):  # not this run's: a file planted there
                continue
            if found is not None and found.run == self.run:
                return found
        return None

    def clean_up_failed(self) -> Manifest | None:
        """After a failed or stopped job: a run stopped after its commit point (manifest.json names
        files of its staging folder) finishes moving them in (`move_in`); a first commit stopped
        before it removes the copies it made. Both only behind the run's lease: a run that lost it
        touches nothing outside its own folder. Then its own folder goes, but a rejected run's
        report; where neither could be done, the folder stays whole, with the manifests that prove
        what the next run into OUTPUT finishes or removes. Returns the rejected manifest."""
        try:
            with Fence(self.output, self.run, self.unattended) as fence:
                committed = _committed_or_none(self.output)
                if committed is None or committed.run != self.run:
                    self._remove_copies(committed, fence)
                elif self.names_staged_files(committed):
                    move_in(self.output, self.run, fence)
        except LeaseLost as e:
            _LOG.warning("%s", e)
        except Exception:
            _LOG.exception(
                "run %s could not finish or undo its commit in %s; the next run there does", self.run, self.output
            )
            return self.rejected()
        rejected = self.rejected()
        own = (REJECTED_MANIFEST_NAME, *rejected.report_files) if rejected else ()
        if not own:
            storage.delete([self.folder], OwnFolder(self.folder))
        else:
            kept = {join(self.folder, name) for name in own}
            written = [path for path in storage.files_below(self.folder) if path not in kept]
            storage.delete(written, OwnFolder(self.folder))
        return rejected

    def _remove_copies(self, committed: Manifest | None, fence: Fence) -> None:
        """The files this run copied to their final names before its commit point, named by the
        manifest it keeps in its folder and by no committed one."""
        path = join(self.folder, MANIFEST_NAME)
        try:
            intended = _manifest_at(path, self.folder)
        except ManifestError:
            return
        if intended is not None:
            named = referenced(committed) if committed else set()
            because, paths = _named(self.output, referenced(intended) - named - {MANIFEST_NAME}, path)
            fence.delete(list(paths), because)


def _manifest_at(path: str, inside: str) -> Manifest | None:
    """The manifest in the file at `path`, read `inside` its folder (core.local_files.open_regular);
    None when there is none (ManifestError: not one)."""
    return read_manifest_file(path, storage.text_reader(inside))


def _committed_or_none(output: str) -> Manifest | None:
    try:
        return committed_manifest(output)
    except ManifestError:
        return None


def _rejected_or_none(output: str) -> Manifest | None:
    """The rejected manifest at the top of `output`; None when there is none, or it is no manifest
    (nor is a link out of `output` or a FIFO planted under its name: core.local_files.open_regular)."""
    try:
        return read_rejected_manifest(output, storage.text_reader(output))
    except (ManifestError, LeadsOutside, NotARegularFile):
        return None
