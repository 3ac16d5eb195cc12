"""The versions of a refreshed dataset below ROOT: publishing a new one (its manifest, then
ROOT/LATEST), rejecting an untrusted one, retention, and cleaning up after a failed run.

    ROOT/20250301T020000Z/   one complete conversion (manifest.json written last, as always)
    ROOT/20250302T020000Z/
    ROOT/LATEST              "20250302T020000Z": the newest version that passed its checks

`VersionPublication.publish` runs as the job's last step (so this also holds for a Flex Template
launch, whose launcher does not wait for the job, and whose job takes ROOT's lease itself:
pipeline.job_lease); it imports no command code, as a worker unpickles it. It writes LATEST and
deletes versions only inside the run's lease Fence (pipeline.lease): a run that lost the lease
touches nothing. A version folder that is a link is
reported and left alone. Names and LATEST parsing: core.contract.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Mapping

from google.protobuf.message import DecodeError
from tensorflow_metadata.proto.v0 import statistics_pb2

from core import storage
from core.contract.folders import folder_kind
from core.contract.layout import MANIFEST_NAME, REJECTED_MANIFEST_NAME, STATISTICS_NAME, join, temporary_of
from core.contract.manifest import Manifest, ManifestError, read_manifest, read_rejected_manifest
from core.contract.versions import LATEST_NAME, is_run_version, is_version, named_like_a_version, version_time
from core.evidence import OwnFolder, RunFolders
from pipeline.config import HoldConfig
from pipeline.hold_checks import held_checks
from pipeline.job_lease import JobLease
from pipeline.lease import LEASE_NAME, LEASE_SECONDS, Fence
from pipeline.publish import JobOutcome, reader_metadata, report_rejection, write_rejection
from pipeline.statistics_file import read_statistics
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


class VersionHeld(JobOutcome):
    """A refresh nobody waits for (a template launch) committed a version but held it: the job
    fails, so that alerting on failed jobs sees it."""


def promote_command(root: str, version: str) -> str:
    """The command that moves LATEST to a held version, as the run and its report say it."""
    return f"python -m pipeline refresh --output {root} --promote {version}"


class NotPromotable(ValueError):
    """`refresh --promote VERSION` named no committed version of ROOT."""


class NotPublished(JobOutcome):
    """A refresh made a version that LATEST cannot name (it names a newer one, written without
    this root's lease): the run fails rather than end as if it had published."""


def _delete_version(root: str, version: str, fence: Fence | None) -> bool:
    """Deletes a version folder its caller proved a run's (behind the run's lease, when it gives
    one); False when it is a link (reported and left alone)."""
    folder, because = join(root, version), RunFolders(root, frozenset([version]))
    deleted = storage.delete([folder], because) if fence is None else fence.delete([folder], because)
    return folder in deleted


def held_version(root: str, latest: str | None) -> tuple[str, Manifest] | None:
    """The newest committed version after the one LATEST names, with its manifest, when it was
    held (nobody has promoted it, and no later refresh was published past it); None otherwise."""
    if latest is None or not is_version(latest):  # no LATEST (a first refresh, or started afresh): none held
        return None
    newer = (v for v in storage.children(root) if is_version(v) and version_time(v) > version_time(latest))
    committed = (v for v in sorted(newer, key=version_time, reverse=True) if _committed(join(root, v)))
    version = next(committed, None)  # the version folders' names, then their tops: not every shard below ROOT
    if version is None:
        return None
    try:
        manifest = read_manifest(join(root, version), storage.text_reader(root))
    except ManifestError:  # no version a refresh held: it wrote its manifest
        return None
    return (version, manifest) if manifest.held else None


def _committed(folder: str) -> bool:
    return folder_kind(folder, storage.text_reader(folder), storage.children).committed


def promote(root: str, version: str, fence: Fence) -> Manifest:
    """Points ROOT/LATEST at `version`, a committed version below ROOT that a person chose (a held
    one, or an older one to go back to); NotPromotable (or ManifestError, for a manifest that does
    not read) when it is not one."""
    if not is_version(version):
        raise NotPromotable(f"{version!r} is not a version's name (a UTC time such as 20260301T020000123456Z)")
    if not _committed(join(root, version)):
        raise NotPromotable(f"{join(root, version)} holds no committed version (no {MANIFEST_NAME})")
    manifest = read_manifest(join(root, version), storage.text_reader(root))
    fence.write(join(root, LATEST_NAME), version + "\n", join(root, version))
    counter("versions_promoted").inc()
    return manifest


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
    unattended: bool = False  # a template launch: the job takes the lease, and no launcher waits to report
    previous: str | None = None  # the version LATEST named when the run began: what drift is measured from
    hold: HoldConfig = dataclasses.field(default_factory=HoldConfig)
    lease_seconds: int = LEASE_SECONDS  # the job's lease's, when it takes one
    on_dataflow: bool = False  # a held version fails the job there, so that alerting on failed jobs sees it

    @property
    def folder(self) -> str:
        return join(self.root, self.version)

    @property
    def job_lease(self) -> JobLease | None:
        """ROOT's lease, taken by the job itself when no launcher waits to hold it for the job."""
        return JobLease(self.root, self.run, self.lease_seconds) if self.unattended else None

    def prepare(self) -> None:
        """Makes the version folder, which must not exist (a link planted there stops the run); a
        job that runs later (unattended, on Dataflow) writes gs://, which has no folders."""
        if not self.unattended:
            storage.make_folder(self.folder)

    def publish(self, manifest: Manifest, files: Mapping[str, bytes] | None = None) -> None:
        with Fence(self.root, self.run) as fence:
            if manifest.rejected:
                write_rejection(self.folder, manifest)
                report_rejection(self.folder, manifest, fail_job=self.unattended)
                return
            files = files or {}
            metadata = reader_metadata(self.folder, manifest)
            for name, data in {**files, **metadata}.items():
                storage.write_atomically(join(self.folder, name), data)
            held = self.drift(manifest, files.get(STATISTICS_NAME))
            manifest = dataclasses.replace(
                manifest, metadata_files=tuple(sorted(metadata)), previous_version=self.previous or "", held=tuple(held)
            )
            storage.write_atomically(join(self.folder, MANIFEST_NAME), manifest.to_json())
            _LOG.info("wrote %s", join(self.folder, MANIFEST_NAME))
            if held:
                self.report_held(held)
            else:
                self.advance(manifest, fence)

    def drift(self, manifest: Manifest, statistics: bytes | None) -> list[str]:
        """The hold checks (pipeline.hold_checks) the new version fails against the version LATEST
        named when the run began; none for a first version. The previous version's statistics that
        cannot be read are left out (it is then compared by its manifest), with a warning."""
        if self.previous is None or statistics is None:
            return []
        folder = join(self.root, self.previous)
        before = read_manifest(folder, storage.text_reader(self.root))
        try:
            before_statistics = read_statistics(folder, before)
        except (OSError, DecodeError) as e:
            _LOG.warning("version %s's statistics cannot be read (%s): compared by its manifest only", self.previous, e)
            before_statistics = None
        after_statistics = statistics_pb2.DatasetFeatureStatisticsList.FromString(statistics)
        return held_checks(before, manifest, before_statistics, after_statistics, self.hold)

    def report_held(self, held: list[str]) -> None:
        """Says the version is committed but held, a line per check. On Dataflow the job fails, so
        that alerting on failed jobs sees it (a launcher that waits then finds the version held and
        exits 4, as a local run's does)."""
        counter("versions_held").inc()
        line = (
            f"{self.folder} held: {self.root}/LATEST stays at {self.previous}; "
            f"look at its report, then {promote_command(self.root, self.version)}"
        )
        if self.unattended or self.on_dataflow:
            raise VersionHeld(f"{line}; it drifted: " + "; ".join(held))
        _LOG.info("%s", line)

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

    def committed_held(self) -> Manifest | None:
        """This run's version's manifest when the run committed it and held it."""
        if not folder_kind(self.folder, storage.text_reader(self.root), storage.children).committed:
            return None
        manifest = read_manifest(self.folder, storage.text_reader(self.root))
        return manifest if manifest.held and manifest.run == self.run else None

    def rejected(self) -> Manifest | None:
        try:
            return read_rejected_manifest(self.folder, storage.text_reader(self.root))
        except ManifestError:
            return None

    def clean_up_failed(self) -> Manifest | None:
        """After a failed run: delete the version folder, except the error report and rejected
        manifest if the job wrote them. Returns the rejected manifest, if any."""
        if latest_version(self.root) == self.version or self.committed_held() is not None:
            return None  # published after all, or committed and held: never delete a committed version
        rejected = self.rejected()
        if rejected is None:
            storage.delete([self.folder], OwnFolder(self.folder))
            return None
        keep = {REJECTED_MANIFEST_NAME, *rejected.report_files}
        written = [p for p in storage.files_below(self.folder) if p[len(self.folder) + 1 :] not in keep]
        storage.delete(written, OwnFolder(self.folder))
        return rejected
