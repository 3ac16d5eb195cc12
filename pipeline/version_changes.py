"""What changed between a refresh version and the one LATEST named when it was made (the manifest's
`previous_version`), for `inspect` and its HTML report (pipeline.html_report): sources added,
removed and changed (a streaming merge of both sources files: pipeline.source_list), records per
split and label before -> after, columns added, removed or retyped, and the distances between
the distributions, measured as the hold checks measure them (pipeline.hold_checks), with the
checks that held the version, if any.

The previous version may be gone (retention) or unreadable: the changes then say so, and the rest
of the report stands."""

from __future__ import annotations

import dataclasses

from google.protobuf.message import DecodeError
from tensorflow_metadata.proto.v0 import statistics_pb2

from core import storage
from core.contract.layout import join
from core.contract.manifest import Manifest, ManifestError, read_manifest
from core.contract.versions import is_version
from pipeline.hold_checks import (
    ColumnChange,
    LabelDrift,
    NumberDrift,
    column_changes,
    label_distance,
    number_divergences,
)
from pipeline.source_list import SourceChanges, SourcesError, compare, read_sources
from pipeline.statistics_file import read_statistics
from pipeline.version_store import latest_version, promote_command

SOURCES_SHOWN = 10  # example paths of the sources added, removed and changed
LINES_SHOWN = 8  # counts and number columns `inspect` prints, of those that moved most


@dataclasses.dataclass(frozen=True)
class VersionChanges:
    version: str  # the one compared with
    unavailable: str = ""  # why it cannot be compared with (it is gone, or does not read)
    counts: tuple[tuple[str, int | None, int | None], ...] = ()  # (what, before, after); None: no such split
    columns: tuple[ColumnChange, ...] = ()
    labels: LabelDrift | None = None
    numbers: tuple[NumberDrift, ...] = ()
    sources: SourceChanges | None = None
    sources_unread: str = ""  # why the sources were not compared
    input: str = ""  # the folder the sources were listed below, left off the paths shown


def version_changes(folder: str, manifest: Manifest) -> VersionChanges | None:
    """The changes of the refresh version in `folder` since its previous version; None for a
    dataset that has none (a first version, or a convert's output)."""
    version = manifest.previous_version
    if not version:
        return None
    if not is_version(version):  # the manifest is read as it is: a name it gives is never a path
        return VersionChanges(version, unavailable=f"{version!r} is not a version's name")
    root = storage.parent(folder)
    previous = join(root, version)
    try:
        before = read_manifest(previous, storage.text_reader(root))
    except ManifestError as e:
        return VersionChanges(version, unavailable=str(e))
    before_statistics, statistics = _statistics(previous, before), _statistics(folder, manifest)
    sources, unread = _sources(previous, before, folder, manifest)
    return VersionChanges(
        version,
        counts=tuple(_counts(before, manifest)),
        columns=tuple(column_changes(before, manifest)),
        labels=label_distance(before, manifest) if manifest.label_map or before.label_map else None,
        numbers=tuple(number_divergences(before_statistics, statistics))
        if before_statistics is not None and statistics is not None
        else (),
        sources=sources,
        sources_unread=unread,
        input=_listed_below(str(manifest.inputs.get("input", ""))),
    )


def _statistics(folder: str, manifest: Manifest) -> statistics_pb2.DatasetFeatureStatisticsList | None:
    """The version's statistics; None where it has none, or they do not read (the distances are
    then left out)."""
    try:
        return read_statistics(folder, manifest)
    except (DecodeError, OSError):
        return None


def _sources(previous: str, before: Manifest, folder: str, after: Manifest) -> tuple[SourceChanges | None, str]:
    if not before.sources_file or not after.sources_file:
        return None, f"version {storage.basename(previous)} holds no sources file"
    try:
        return compare(
            read_sources(join(previous, before.sources_file), inside=previous),
            read_sources(join(folder, after.sources_file), inside=folder),
            SOURCES_SHOWN,
        ), ""
    except (SourcesError, OSError, EOFError) as e:
        return None, str(e)


def _counts(before: Manifest, after: Manifest) -> list[tuple[str, int | None, int | None]]:
    """Records, errors, and records per split and per label in each split, before and after."""
    counts = [("records", before.counts.written, after.counts.written)]
    counts.append(("errors", before.counts.errors, after.counts.errors))
    for name in sorted(before.splits.keys() | after.splits.keys()):
        was, now = before.splits.get(name), after.splits.get(name)
        counts.append((name, was.records if was else None, now.records if now else None))
        was_labels, now_labels = (was.label_counts if was else {}), (now.label_counts if now else {})
        for label in sorted(was_labels.keys() | now_labels.keys()):
            counts.append((f"{name} / {label}", was_labels.get(label, 0), now_labels.get(label, 0)))
    return counts


def _listed_below(source: str) -> str:
    """The folder an input is listed below: a table's pattern lists its literal folder."""
    return storage.pattern_root(source) if storage.has_wildcard(source) else source


def shown_path(path: str, changes: VersionChanges) -> str:
    """A source's path below the input it was listed in, when it lies there."""
    prefix = changes.input.rstrip("/") + "/"
    return path[len(prefix) :] if changes.input and path.startswith(prefix) else path


def change_lines(changes: VersionChanges) -> list[str]:
    """The changes as `inspect` prints them: totals and what moved, a line each."""
    if changes.unavailable:
        return [f"since version {changes.version}: not compared, {changes.unavailable}"]
    lines = [f"since version {changes.version} (LATEST when this one was made):"]
    moved = [row for row in changes.counts if row[0] == "records" or row[1] != row[2]]
    for what, before, after in moved[:LINES_SHOWN]:
        lines.append(f"  {what}: {_count(before)} -> {_count(after)}")
    if len(moved) > LINES_SHOWN:
        lines.append(f"  ... and {len(moved) - LINES_SHOWN} more counts that changed (--report shows every one)")
    s = changes.sources
    if s is not None:
        lines.append(
            f"  sources: {s.added:,} added, {s.removed:,} removed, {s.changed:,} changed, {s.unchanged:,} same"
        )
        for kind, first in (("added", s.first_added), ("removed", s.first_removed), ("changed", s.first_changed)):
            if first:
                lines.append(f"    {kind}: " + ", ".join(shown_path(path, changes) for path in first[:3]))
    else:
        lines.append(f"  sources: not compared, {changes.sources_unread}")
    for c in changes.columns:
        lines.append(f"  column {c.name}: {c.before or 'none'} -> {c.after or 'none'}")
    if changes.labels is not None:
        d = changes.labels
        lines.append(
            f"  labels: L-infinity distance {d.distance:.3f} (class {d.label}: {d.before:.1%} -> {d.after:.1%})"
        )
    drifted = sorted(changes.numbers, key=lambda d: -d.divergence)
    for d in drifted[:LINES_SHOWN]:
        lines.append(f"  {d.name} in {d.split}: Jensen-Shannon divergence {d.divergence:.3f}")
    if len(drifted) > LINES_SHOWN:
        lines.append(f"  ... and {len(drifted) - LINES_SHOWN} more number columns, which moved less")
    return lines


def _count(n: int | None) -> str:
    return "none" if n is None else f"{n:,}"


def held_lines(folder: str, manifest: Manifest) -> list[str]:
    """A held version's checks (indented), and how to promote it, or that it was promoted since;
    none for a version that was not held."""
    if not manifest.held:
        return []
    root, version = storage.parent(folder), storage.basename(folder)
    if latest_version(root) == version:
        return ["held when it was made, for these drift checks, then promoted: LATEST names it", *_indented(manifest)]
    previous = manifest.previous_version or "none"
    return [
        f"held: LATEST was not moved to version {version}; {root}/LATEST stays at {previous}. The drift checks it "
        f"failed against {previous}:",
        *_indented(manifest),
        f"Once you have looked at it (python -m pipeline inspect {folder} --report report.html): "
        f"{promote_command(root, version)}",
    ]


def _indented(manifest: Manifest) -> list[str]:
    return [f"  {line}" for line in manifest.held]
