"""The versions of a refreshed dataset below ROOT: publishing a new one (its manifest, then
ROOT/LATEST), rejecting an untrusted one, retention, and cleaning up after a failed run.

    ROOT/20250301T020000Z/   one complete conversion (manifest.json written last, as always)
    ROOT/20250302T020000Z/
    ROOT/LATEST              "20250302T020000Z": the newest version that passed its checks

`VersionPublication.publish` runs as the job's last step (so this also holds for a Flex Template
launch, whose launcher does not wait for the job); it imports no command code, as a worker
unpickles it. Names and LATEST parsing: pipeline.contract.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging

from pipeline import storage
from pipeline.contract.layout import MANIFEST_NAME, REJECTED_MANIFEST_NAME, join
from pipeline.contract.manifest import Manifest
from pipeline.contract.versions import LATEST_NAME, is_version, read_pointer, version_time
from pipeline.publish import rejected_if_untrusted, with_reader_metadata, write_manifest
from transforms.counting import counter

_LOG = logging.getLogger(__name__)
# Retention leaves a version folder without any manifest alone while it is this young: it may
# belong to a refresh that is still running.
INCOMPLETE_GRACE = datetime.timedelta(days=2)


def latest_version(root: str) -> str | None:
    """The version ROOT/LATEST names, or None when there is none."""
    return read_pointer(root, storage.read_text)


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


def remove_unfinished_versions(root: str) -> list[str]:
    """Deletes the version folders without any manifest: under the root's lease (pipeline.lease)
    no other run is writing, so they belong to runs that died. Returns the versions deleted."""
    unfinished = sorted(v for v, state in version_states(root).items() if state == "incomplete")
    for version in unfinished:
        storage.delete_folder(join(root, version))
    if unfinished:
        _LOG.info("removed version folder(s) %s of %s: left by runs that did not finish", ", ".join(unfinished), root)
    return unfinished


def apply_retention(root: str, keep: int, latest: str, now: datetime.datetime | None = None) -> list[str]:
    """Deletes complete versions beyond the newest `keep`, and failed or abandoned ones, but only
    versions older than `latest` (the one LATEST names, always kept; newer ones may still be
    running). Returns the versions deleted."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    states = version_states(root)
    complete = sorted(v for v, state in states.items() if state == "complete")
    kept = set(complete[-keep:]) | {latest}
    deleted = []
    for version, state in sorted(states.items()):
        if version >= latest or version in kept:
            continue
        if state == "incomplete" and now - version_time(version) < INCOMPLETE_GRACE:
            continue
        storage.delete_folder(join(root, version))
        deleted.append(version)
    if deleted:
        _LOG.info("retention (keep %d): deleted version(s) %s of %s", keep, ", ".join(deleted), root)
    return deleted


@dataclasses.dataclass(frozen=True)
class VersionPublication:
    """A refresh's Publication (pipeline.publish): only a trusted run gets manifest.json and then
    moves ROOT/LATEST; any other gets manifest.rejected.json and fails the job."""

    root: str
    version: str
    keep: int | None = None
    unattended: bool = False  # a template launch: no launcher waits to report a rejection

    @property
    def folder(self) -> str:
        return join(self.root, self.version)

    @property
    def run(self) -> str:
        return self.version

    def publish(self, manifest: Manifest) -> None:
        if rejected_if_untrusted(manifest, self.folder, self.root, self.version, self.unattended):
            return
        write_manifest(self.folder, with_reader_metadata(self.folder, manifest))
        self.advance(manifest)

    def advance(self, manifest: Manifest) -> None:
        """manifest.json is written: point LATEST here (never back to an older version)."""
        current = latest_version(self.root)
        if current is not None and is_version(current) and current > self.version:
            _LOG.warning(
                "%s/LATEST already names the newer version %s; leaving it (this run: %s)",
                self.root,
                current,
                self.version,
            )
            return
        storage.write_atomically(join(self.root, LATEST_NAME), self.version + "\n")
        counter("versions_published").inc()
        _LOG.info(
            "published %s: %s/LATEST -> %s (%d records)", self.folder, self.root, self.version, manifest.counts.written
        )
        if self.keep:
            try:
                apply_retention(self.root, self.keep, self.version)
            except Exception:  # the version is published; retention can wait for the next refresh
                _LOG.exception("retention failed in %s; the next refresh tries again", self.root)

    def clean_up_failed(self) -> Manifest | None:
        """After a failed run: delete the version folder, except the error report and rejected
        manifest if the job wrote them. Returns the rejected manifest, if any."""
        if latest_version(self.root) == self.version:
            return None  # published after all: never delete what LATEST names
        text = storage.read_text(join(self.folder, REJECTED_MANIFEST_NAME))
        if text is None:
            storage.delete_folder(self.folder)
            return None
        rejected = Manifest.from_json(text)
        keep = {REJECTED_MANIFEST_NAME, *rejected.report_files}
        storage.delete([p for p in storage.files_below(self.folder) if p[len(self.folder) + 1 :] not in keep])
        return rejected
