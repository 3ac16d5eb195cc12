"""The versions of a refreshed dataset below ROOT: publishing a new one (its manifest, then
ROOT/LATEST), rejecting an untrusted one, retention, and cleaning up after a failed run.

    ROOT/20250301T020000Z/   one complete conversion (manifest.json written last, as always)
    ROOT/20250302T020000Z/
    ROOT/LATEST              "20250302T020000Z": the newest version that passed its checks

`VersionPublication.publish` runs as the job's last step (so this also holds for a Flex Template
launch, whose launcher does not wait for the job); it imports no command code, as a worker
unpickles it. It writes LATEST and deletes versions only inside the run's lease Fence
(pipeline.lease): a run that lost the lease touches nothing. A version folder that is a link is
reported and left alone. Names and LATEST parsing: core.contract.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Mapping

from core import storage
from core.contract.folders import folder_kind
from core.contract.layout import MANIFEST_NAME, REJECTED_MANIFEST_NAME, join, temporary_of
from core.contract.manifest import Manifest, ManifestError, read_rejected_manifest
from core.contract.versions import LATEST_NAME, is_run_version, is_version, named_like_a_version, version_time
from core.evidence import OwnFolder, RunFolders
from pipeline.lease import LEASE_NAME, Fence
from pipeline.publish import reader_metadata, report_rejection, write_rejection
from transforms.counting import counter

_LOG = logging.getLogger(__name__)
# Retention leaves a version folder without any manifest alone while it is this young: it may
# belong to a refresh that is still running.
INCOMPLETE_GRACE = datetime.timedelta(days=2)
_OWN_FILES = (LATEST_NAME, LEASE_NAME)  # ROOT's files, besides the version folders


def latest_version(root: str) -> str | None:
    """The version ROOT/LATEST names, or None when there is none (core.contract.folders)."""
    return folder_kind(root, storage.text_reader(root), storage.children).latest


def version_states(root: str) -> dict[str, str]:
    """{version: "complete" | "rejected" | "incomplete"} for the version folders below ROOT."""
    names: dict[str, set[str]] = {name: set() for name in storage.children(root) if is_version(name)}
    prefix = root.rstrip("/") + "/"
    for path in storage.files_below(root):
        version, _, rest = path[len(prefix) :].partition("/")
        if rest and is_version(version):
            names.setdefault(version, set()).add(rest)
    return {
        v: "complete" if MANIFEST_NAME in files else "rejected" if REJECTED_MANIFEST_NAME in files else "incomplete"
        for v, files in names.items()
    }


def not_from_refreshes(root: str) -> list[str]:
    """The names at ROOT's top level that are not a version folder, LATEST, or a temporary file of
    LATEST or the lease (an older release's `LATEST.tmp`), hidden ones aside (`.lease`, `.gitkeep`):
    what a refresh root holds besides its own."""
    return [
        name
        for name in storage.children(root)
        if not name.startswith(".")
        and not named_like_a_version(name)  # one that is no time is said once, and left alone (preflight)
        and (temporary_of(name) or name) not in _OWN_FILES
    ]


def promote_command(root: str, version: str) -> str:
    """The command that moves LATEST to a held version, as the run and its report say it."""
    return f"python -m pipeline refresh --output {root} --promote {version}"


class NotPublished(RuntimeError):
    """A refresh made a version that LATEST cannot name (it names a newer one, written without
    this root's lease): the run fails rather than end as if it had published."""


def _delete_version(root: str, version: str, fence: Fence | None) -> bool:
    """Deletes a version folder its caller proved a run's (behind the run's lease, when it gives
    one); False when it is a link (reported and left alone)."""
    folder, because = join(root, version), RunFolders(root, frozenset([version]))
    deleted = storage.delete([folder], because) if fence is None else fence.delete([folder], because)
    return folder in deleted


def remove_unfinished_versions(root: str, fence: Fence) -> list[str]:
    """Deletes the version folders without any manifest whose names only a refresh makes (named to
    the microsecond: an earlier release's version to the second without a manifest is left alone):
    under the root's lease (pipeline.lease) no other run is writing, so they belong to runs that
    died. Returns the versions deleted."""
    states = version_states(root)
    unfinished = sorted(v for v, state in states.items() if state == "incomplete" and is_run_version(v))
    deleted = [version for version in unfinished if _delete_version(root, version, fence)]
    if deleted:
        _LOG.info("removed version folder(s) %s of %s: left by runs that did not finish", ", ".join(deleted), root)
    return deleted


def apply_retention(
    root: str, keep: int, latest: str, fence: Fence | None = None, now: datetime.datetime | None = None
) -> list[str]:
    """Deletes complete versions beyond the newest `keep`, and failed or abandoned ones (a run's:
    named to the microsecond), but only versions older than `latest` (the one LATEST names, always
    kept; newer ones may still be running). Returns the versions deleted."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    states = version_states(root)
    complete = sorted((v for v, state in states.items() if state == "complete"), key=version_time)
    kept = set(complete[-keep:]) | {latest}
    deleted = []
    for version, state in sorted(states.items()):
        if version_time(version) >= version_time(latest) or version in kept:
            continue
        if state == "incomplete" and (not is_run_version(version) or now - version_time(version) < INCOMPLETE_GRACE):
            continue
        if _delete_version(root, version, fence):
            deleted.append(version)
    if deleted:
        _LOG.info("retention (keep %d): deleted version(s) %s of %s", keep, ", ".join(deleted), root)
    return deleted


@dataclasses.dataclass(frozen=True)
class VersionPublication:
    """A refresh's Publication (pipeline.publish): only a trusted run gets manifest.json and then
    moves ROOT/LATEST; any other gets manifest.rejected.json (and fails the job when nobody waits
    for it). `version` sorts after every version of ROOT (contract.versions.next_version)."""

    root: str
    version: str
    run: str  # the run holding ROOT's lease (pipeline.lease)
    keep: int | None = None
    unattended: bool = False  # a template launch: no lease, and no launcher waits to report a rejection

    @property
    def folder(self) -> str:
        return join(self.root, self.version)

    def prepare(self) -> None:
        """Makes the version folder, which must not exist (a link planted there stops the run); a
        job that runs later (unattended, on Dataflow) writes gs://, which has no folders."""
        if not self.unattended:
            storage.make_folder(self.folder)

    def publish(self, manifest: Manifest, files: Mapping[str, bytes] | None = None) -> None:
        with Fence(self.root, self.run, self.unattended) as fence:
            if manifest.rejected:
                write_rejection(self.folder, manifest)
                report_rejection(self.folder, manifest, fail_job=self.unattended)
                return
            metadata = reader_metadata(self.folder, manifest)
            for name, data in {**(files or {}), **metadata}.items():
                storage.write_atomically(join(self.folder, name), data)
            manifest = dataclasses.replace(manifest, metadata_files=tuple(sorted(metadata)))
            storage.write_atomically(join(self.folder, MANIFEST_NAME), manifest.to_json())
            _LOG.info("wrote %s", join(self.folder, MANIFEST_NAME))
            self.advance(manifest, fence)

    def advance(self, manifest: Manifest, fence: Fence) -> None:
        """manifest.json is written: point LATEST here (never back to an older version)."""
        current = latest_version(self.root)
        if current is not None and is_version(current) and version_time(current) > version_time(self.version):
            raise NotPublished(
                f"{self.root}/LATEST names {current}, newer than this run's {self.version}, which was written "
                f"by something that did not hold the root's lease: version {self.version} is not published"
            )
        fence.write(join(self.root, LATEST_NAME), self.version + "\n", self.folder)
        counter("versions_published").inc()
        _LOG.info(
            "published %s: %s/LATEST -> %s (%d records)", self.folder, self.root, self.version, manifest.counts.written
        )
        if self.keep:
            try:
                apply_retention(self.root, self.keep, self.version, fence)
            except Exception:  # the version is published; retention can wait for the next refresh
                _LOG.exception("retention failed in %s; the next refresh tries again", self.root)

    def rejected(self) -> Manifest | None:
        try:
            return read_rejected_manifest(self.folder, storage.text_reader(self.root))
        except ManifestError:
            return None

    def clean_up_failed(self) -> Manifest | None:
        """After a failed run: delete the version folder, except the error report and rejected
        manifest if the job wrote them. Returns the rejected manifest, if any."""
        if latest_version(self.root) == self.version:
            return None  # published after all: never delete what LATEST names
        rejected = self.rejected()
        if rejected is None:
            storage.delete([self.folder], OwnFolder(self.folder))
            return None
        keep = {REJECTED_MANIFEST_NAME, *rejected.report_files}
        written = [p for p in storage.files_below(self.folder) if p[len(self.folder) + 1 :] not in keep]
        storage.delete(written, OwnFolder(self.folder))
        return rejected
