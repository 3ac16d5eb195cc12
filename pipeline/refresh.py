"""`python -m pipeline refresh --input SRC --output ROOT [conversion flags] [--keep K]`: publish a
new version of a dataset.

    ROOT/20250301T020000Z/   one complete conversion (manifest.json written last, as always)
    ROOT/20250302T020000Z/
    ROOT/LATEST              "20250302T020000Z": the newest version that passed its checks

A refresh lists SRC first. When the listing (paths, sizes, mtimes/generations: its fingerprint)
and the settings are those of the version LATEST names, it prints "nothing changed" and exits 0
without writing anything. Otherwise it converts into ROOT/<UTC timestamp>/ and the job's last
step (publish.PublishManifest, so this also holds for a Flex Template launch, whose launcher does
not wait for the job) checks the run as `publish.problems` does and then either

* writes manifest.json and then LATEST (temporary file + rename, through Beam FileSystems, so
  local disk and gs:// alike); with --keep K, deletes versions beyond the newest K (never the one
  LATEST names, never anything newer); or
* writes manifest.rejected.json instead of manifest.json (a folder without manifest.json is
  incomplete by contract), deletes the shards, keeps the error report, and fails the job.

A run that crashes or is interrupted never reaches that step, so LATEST never moves; on local
failures the refresh deletes its version folder (keeping only the error report and rejected
manifest, when there are). Splits do not move between versions: a source's split is a hash of
its path below SRC (transforms.splits), whatever else was added.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.cli import overrides, parser as convert_parser, run_job, stages_only, summary_text
from pipeline.config import Config, ConfigError, load_config, to_dict
from pipeline.latest import (LATEST_NAME, LatestPointerError, is_version, join, new_version, read_pointer,
                             version_time)
from pipeline.manifest import MANIFEST_NAME, Manifest, ManifestError
from pipeline.output import OutputExistsError, prepare_output, read_manifest
from pipeline.planning import Plan, PlanError, absolute, make_plan, match
from pipeline.publish import problems, write_atomically
from pipeline.runners import make_pipeline, pipeline_options
from transforms.outcomes import counter

_LOG = logging.getLogger("pipeline.refresh")
REJECTED_MANIFEST_NAME = "manifest.rejected.json"
# Retention leaves a version folder without any manifest alone while it is this young: it may
# belong to a refresh that is still running.
INCOMPLETE_GRACE = datetime.timedelta(days=2)
# Settings that differ between versions by construction, or are derived from the listing.
_NOT_SETTINGS = ("output", "overwrite", "planned_shards", "planned_split_bytes")


def parser():
    p = convert_parser()
    p.prog = "python -m pipeline refresh"
    p.description = ("Publish a new version of a dataset: convert into OUTPUT/<UTC timestamp>/, then point "
                     "OUTPUT/LATEST at it, only if the run succeeded; unchanged input is skipped.")
    help_for = {"output": "ROOT: the folder (local or gs://) that holds the versions and LATEST",
                "overwrite": "no effect: a refresh always writes a new version folder"}
    for action in p._actions:  # pylint: disable=protected-access
        action.help = help_for.get(action.dest, action.help)
    p.add_argument("--keep", type=int, help="retention: keep the newest KEEP versions (never deleting the one "
                                            "LATEST names); default: keep all")
    return p


# -- I/O through Beam FileSystems (local paths and gs:// alike) --------------------------------

def read_text(path: str) -> str | None:
    """The text of a file, or None when there is none (for pipeline.latest)."""
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as f:
        return f.read().decode("utf-8")


def _files_below(folder: str) -> list[str]:
    return [m.path for m in match(join(folder, "**"))]


def delete_folder(folder: str) -> None:
    if "://" in folder:
        paths = _files_below(folder)
        if paths:
            FileSystems.delete(paths)
    elif FileSystems.exists(folder):
        FileSystems.delete([folder])  # local: removes the directory tree


def version_states(root: str) -> dict[str, str]:
    """{version: "complete" | "rejected" | "incomplete"} for the version folders below ROOT."""
    names: dict[str, set[str]] = {}
    prefix = root.rstrip("/") + "/"
    for path in _files_below(root):
        version, _, rest = path[len(prefix):].partition("/")
        if rest and is_version(version):
            names.setdefault(version, set()).add(rest)
    return {v: "complete" if MANIFEST_NAME in files else "rejected" if REJECTED_MANIFEST_NAME in files else "incomplete"
            for v, files in names.items()}


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
        delete_folder(join(root, version))
        deleted.append(version)
    if deleted:
        _LOG.info("retention (keep %d): deleted version(s) %s of %s", keep, ", ".join(deleted), root)
    return deleted


@dataclasses.dataclass(frozen=True)
class VersionPointer:
    """Handed to publish.PublishManifest: runs in the job, after the checks (see module doc)."""

    root: str
    version: str
    keep: int | None = None

    @property
    def folder(self) -> str:
        return join(self.root, self.version)

    def advance(self, manifest: Manifest) -> None:
        """manifest.json is written: point LATEST here (never back to an older version)."""
        current = read_pointer(self.root, read_text)
        if current is not None and is_version(current) and current > self.version:
            _LOG.warning("%s/LATEST already names the newer version %s; leaving it (this run: %s)",
                         self.root, current, self.version)
            return
        write_atomically(join(self.root, LATEST_NAME), self.version + "\n")
        counter("versions_published").inc()
        _LOG.info("published %s: %s/LATEST -> %s (%d records)", self.folder, self.root, self.version,
                  manifest.counts.written)
        if self.keep:
            try:
                apply_retention(self.root, self.keep, self.version)
            except Exception:  # pylint: disable=broad-except  # the version is published; retention can wait
                _LOG.exception("retention failed in %s; the next refresh tries again", self.root)

    def reject(self, manifest: Manifest, found: list[str]) -> None:
        """The run must not be trusted: never a manifest.json here; the report stays."""
        write_atomically(join(self.folder, REJECTED_MANIFEST_NAME), manifest.to_json())
        shards = [join(self.folder, s) for split in manifest.splits.values() for s in split.shards]
        existing = [s for s in shards if FileSystems.exists(s)]
        if existing:
            FileSystems.delete(existing)
        counter("versions_rejected").inc()
        _LOG.error("version %s not published, LATEST unchanged: %s", self.folder, "; ".join(found))


# -- the command ---------------------------------------------------------------------------------

def _settings(options: dict) -> str:
    return json.dumps({k: v for k, v in options.items() if k not in _NOT_SETTINGS}, sort_keys=True, default=str)


def unchanged_since(root: str, version: str, plan: Plan, config: Config) -> str | None:
    """Why no new version is needed (a message), or None when one is."""
    try:
        previous = read_manifest(join(root, version))
    except ManifestError as e:  # missing or unreadable: LATEST names a version we cannot compare with
        _LOG.warning("cannot use the manifest of the version LATEST names (%s): refreshing", e)
        return None
    if previous.listing.get("fingerprint") != plan.listing["fingerprint"]:
        return None
    if _settings(previous.options) != _settings(json.loads(json.dumps(to_dict(config), default=str))):
        _LOG.info("the input is unchanged but the settings differ from version %s: refreshing", version)
        return None
    return (f"nothing changed: the input listing ({plan.listing['files']} file(s), fingerprint "
            f"{plan.listing['fingerprint'][:12]}) and the settings are those of version {version} "
            f"({root}/LATEST); no new version written")


def _report_unchanged(message: str) -> None:
    counter("refresh_unchanged").inc()
    _LOG.info("%s", message)


def _stage_unchanged_job(beam_args: list[str], message: str) -> None:
    """A Flex Template launch must stage a job (the launcher fails without one): a one-step job
    that only reports the skip, touching no data."""
    p = make_pipeline(pipeline_options(beam_args))
    _ = p | "NothingChanged" >> beam.Create([message]) | "Report" >> beam.Map(_report_unchanged)
    p.run()


def _clean_up_failed(pointer: VersionPointer) -> str | None:
    """After a local failure: delete the version folder, except the error report and rejected
    manifest if the job wrote them. Returns the rejected manifest's text, if any."""
    if read_pointer(pointer.root, read_text) == pointer.version:
        return None  # published after all: never delete what LATEST names
    rejected = read_text(join(pointer.folder, REJECTED_MANIFEST_NAME))
    if rejected is None:
        delete_folder(pointer.folder)
        return None
    keep = {REJECTED_MANIFEST_NAME, *Manifest.from_json(rejected).error_files}
    leftovers = [p for p in _files_below(pointer.folder) if p[len(pointer.folder) + 1:] not in keep]
    if leftovers:
        FileSystems.delete(leftovers)
    return rejected


def main(argv: list[str]) -> int:
    args, beam_args = parser().parse_known_args(argv)
    keep = args.keep
    del args.keep
    try:
        if keep is not None and keep < 1:
            raise ConfigError("--keep must be at least 1")
        config = load_config(args.config, overrides(args))
        if not config.output:
            raise ConfigError("refresh needs --output ROOT (the folder that holds the versions and LATEST)")
        root = absolute(config.output).rstrip("/")
        pointer = VersionPointer(root, new_version(), keep)
        config = dataclasses.replace(config, output=pointer.folder, overwrite=False)
        plan = make_plan(config)
        previous = read_pointer(root, read_text)
        message = unchanged_since(root, previous, plan, config) if previous else None
        if message:
            print(message)
            if stages_only(pipeline_options(beam_args)):
                _stage_unchanged_job(beam_args, message)
            return 0
        prepare_output(plan.output, overwrite=False)  # a version folder is always new
    except (ConfigError, PlanError, OutputExistsError, LatestPointerError) as e:
        _LOG.error("%s", e)
        return 2

    _LOG.info("refreshing %s: version %s from %d listed file(s) of %s (LATEST: %s)", root, pointer.version,
              plan.listing["files"], plan.input, previous or "none")
    started = time.monotonic()
    try:
        manifest = run_job(plan, config, beam_args, latest=pointer)
    except BaseException as e:  # pylint: disable=broad-except  # clean up, then report or re-raise
        try:
            rejected = _clean_up_failed(pointer)
        except Exception:  # pylint: disable=broad-except  # report the run's failure, not the clean-up's
            _LOG.exception("could not clean up %s (LATEST does not name it)", pointer.folder)
            rejected = None
        if not isinstance(e, Exception):
            raise
        found = problems(plan, Manifest.from_json(rejected)) if rejected else [f"the job failed: {e}"]
        for problem in found:
            _LOG.error("%s", problem)
        _LOG.error("refresh failed; %s/LATEST still names %s", root, previous or "nothing")
        return 1
    if manifest is None:
        print(f"Refresh job staged: it converts into {plan.output} and, if the run passes its checks, "
              f"points {root}/LATEST at {pointer.version}")
        return 0
    print(summary_text(manifest, plan.output, time.monotonic() - started))
    latest = read_pointer(root, read_text)
    if latest != pointer.version:
        _LOG.warning("%s/LATEST names %s, not this run's %s (a newer refresh published first)", root, latest,
                     pointer.version)
    else:
        print(f"Published version {pointer.version}: {root}/LATEST -> {pointer.version}")
    return 0
