"""`python -m pipeline refresh --input SRC --output ROOT [conversion flags] [--keep K]`: publish a
new version of a dataset (the layout of ROOT: pipeline.version_store).

A refresh lists SRC first, keeping each entry (pipeline.source_list) for the version's
sources.jsonl.gz, written into its folder before the job runs and checked by its last step; the
manifest names it and the version LATEST named (`previous_version`), which `inspect` compares it
with (pipeline.version_changes). When the listing (paths, sizes, mtimes/generations: its fingerprint)
and the settings are those of the version LATEST names, it prints "nothing changed" and exits 0
without writing anything. Otherwise it converts into ROOT/<UTC timestamp>/ (a name after every
version of ROOT, whatever the clock says: contract.versions.next_version) and the job's last
step checks the run as `publish.problems` does and then either

* writes manifest.json and then LATEST (temporary file + rename, through Beam FileSystems, so
  local disk and gs:// alike); with --keep K, deletes versions beyond the newest K (never the one
  LATEST names, never anything newer); or
* when its statistics drifted from those of the version LATEST names past the `hold` settings
  (pipeline.hold_checks), writes manifest.json naming the checks it failed (`held`) and leaves
  LATEST: the run exits 4, a job nobody waits for fails, and a rerun on unchanged input exits 4
  again, until `--promote VERSION` (a person's decision) points LATEST at it; or
* writes manifest.rejected.json instead of manifest.json (a folder without manifest.json is
  incomplete by contract), deletes the shards, keeps the error report, and fails the job.

A run that crashes or is interrupted never reaches that step, so LATEST never moves; on local
failures the refresh deletes its version folder (keeping only the error report and rejected
manifest, when there are). A refresh that made a version it could not publish never exits 0.
One refresh per ROOT at a time (ROOT/.lease: pipeline.lease; a job launched from a template takes
it itself: pipeline.job_lease); it deletes version folders left
without any manifest by runs that died, also when the input is unchanged. Splits do not move between
versions: a source's split is a hash of its path below SRC (transforms.splits), whatever else was
added. Nor do label ids: a new version keeps the previous one's, new labels after them
(transforms.label_column.kept_ids).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from pydantic_core import to_jsonable_python

from core import storage
from core.contract.layout import SOURCES_NAME, join
from core.contract.manifest import Manifest, ManifestError, read_manifest
from core.contract.versions import LatestPointerError, new_run, next_version
from core.shown import quoted, show
from pipeline.build import converting_processes
from pipeline.config import Config, ConfigError, load_config, to_dict, with_defaults
from pipeline.ending import saying_what_dest_holds, version_outcome
from pipeline.flags import REFRESH_FLAGS, command_name, config_overrides, make_parser, parse_command_line
from pipeline.job import EXIT_FAILED, EXIT_HELD, EXIT_REFUSED, EXIT_REJECTED, RunFailedError, run_job, stages_only
from pipeline.lease import Fence, Lease, LeaseHeldError
from pipeline.listing_digest import same_method
from pipeline.planning import Plan, PlanError, make_plan
from pipeline.preflight import (
    PreflightError,
    check_folder_kind,
    check_input,
    check_other_refresh_files,
    check_output,
    take_lease,
)
from pipeline.report import rejection_report, run_summary
from pipeline.runners import (
    UnsafeOptionError,
    make_pipeline,
    pipeline_options,
    reads_local_files,
    refuse_unsafe_options,
    runner_of,
    runs_here,
)
from pipeline.source_list import SourceList
from pipeline.version_changes import held_lines
from pipeline.version_store import (
    NotPromotable,
    VersionHeld,
    VersionPublication,
    held_version,
    latest_version,
    promote,
    remove_unfinished_versions,
    version_states,
)
from transforms import convert_pool
from transforms.counting import counter
from transforms.label_column import kept_ids

_LOG = logging.getLogger("pipeline.refresh")
# Settings that differ between versions by construction, or are derived from the listing.
_NOT_SETTINGS = (
    "output",
    "overwrite",
    "allow_other_files",
    "planned_shards",
    "planned_split_bytes",
    "planned_delimiter",
    "lease_seconds",
    "listing_threads",
)


def parser() -> argparse.ArgumentParser:
    return make_parser(
        command_name("refresh"),
        "Publish a new version of a dataset: convert into OUTPUT/<UTC timestamp>/, then point\n"
        "OUTPUT/LATEST at it, only if the run succeeded and its statistics did not drift from\n"
        "LATEST's version (else it is held: exit 4, until --promote); unchanged input is skipped.",
        REFRESH_FLAGS,
    )


def _settings(options: dict) -> dict:
    """The settings that make a version what it is, comparable across versions made before and
    after a setting was added (config.with_defaults), as a manifest holds them (JSON: lists)."""
    settings = with_defaults(options)
    return to_jsonable_python({k: v for k, v in settings.items() if k not in _NOT_SETTINGS}, fallback=str)


def _leaves(settings: dict, prefix: str = ""):
    """(dotted key, value) of each setting, walking into every section that holds any."""
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def changed_settings(before: dict, after: dict) -> list[str]:
    """`section.key: before -> after` for each setting whose value differs, in the order of the
    keys: a refresh that converts everything again says which setting made it."""
    old, new = dict(_leaves(before)), dict(_leaves(after))

    def shown(side: dict, key: str) -> str:
        return quoted(side[key]) if key in side else "(none)"

    return [
        f"{key}: {shown(old, key)} -> {shown(new, key)}"
        for key in sorted(old.keys() | new.keys())
        if key not in old or key not in new or old[key] != new[key]
    ]


def previous_manifest(root: str, version: str | None) -> Manifest | None:
    """The manifest of the version LATEST names; None when LATEST names none. One that cannot be
    read (missing, damaged, malformed) stops the refresh (LatestPointerError, exit 2): a new
    version keeps the label ids of the previous one, so that a model trained on it reads the new
    records with the right classes, and one made without them could renumber every class with
    nobody watching a scheduled refresh's log. The readers that follow LATEST refuse that version
    too; the fix is the user's: point LATEST at a version that reads, or remove it."""
    if version is None:
        return None
    try:
        return read_manifest(join(root, version), storage.text_reader(root))
    except ManifestError as e:
        raise LatestPointerError(
            f"{root}/LATEST names version {version}, whose label ids a refresh keeps, but {e}; or point LATEST at "
            f"a version that reads (echo VERSION > {root}/LATEST), or remove {root}/LATEST to start afresh"
        ) from e


def unchanged_since(root: str, version: str, previous: Manifest, plan: Plan, config: Config) -> str | None:
    """Why no new version is needed (a message), or None when one is."""
    if previous.listing is not None and not same_method(previous.listing.fingerprint):
        _LOG.info(
            "version %s was fingerprinted by an older method (its sorted listing), which no listing now matches: "
            "refreshing once; later refreshes of unchanged input are skipped again",
            version,
        )
        return None
    if previous.listing is None or previous.listing.fingerprint != plan.listing.fingerprint:
        return None
    changed = changed_settings(_settings(previous.options), _settings(to_dict(config)))
    if changed:
        _LOG.info(
            "the input is unchanged but settings differ from version %s (%s): refreshing", version, "; ".join(changed)
        )
        return None
    return (
        f"nothing changed: the input listing ({plan.listing.files} file(s), fingerprint "
        f"{plan.listing.fingerprint[:12]}) and the settings are those of version {version} "
        f"({root}/LATEST); no new version written"
    )


def with_previous_ids(plan: Plan, previous: Manifest | None) -> Plan:
    """The plan with the label ids of the previous version of the same kind (label_map.kept_ids)."""
    if previous is None or previous.kind != plan.kind or not previous.label_map:
        return plan
    if previous.label_column != plan.label_column:  # a table's classes are those of its label column
        return plan
    label_map = kept_ids(previous.label_map, plan.label_map)
    if label_map != plan.label_map:
        _LOG.info(
            "label ids kept from the previous version; new labels after them: %s; labels without sources now: %s",
            sorted(set(plan.label_map) - set(previous.label_map)),
            sorted(set(previous.label_map) - set(plan.label_map)),
        )
    return dataclasses.replace(plan, label_map=label_map, kept_labels=len(previous.label_map))


def _report_unchanged(message: str) -> None:
    counter("refresh_unchanged").inc()
    _LOG.info("%s", message)


def _report_still_held(message: str) -> None:
    raise VersionHeld(message)


def unchanged_job(beam_args: list[str], message: str, still_held: bool = False) -> beam.Pipeline:
    """What a Flex Template launch stages when there is nothing to convert (the launcher fails
    without a job): a one-step job that only reports the skip, touching no data; it fails when the
    version it skips is held, so that alerting on failed jobs keeps seeing it until a person
    decides."""
    p = make_pipeline(pipeline_options(beam_args))
    report = _report_still_held if still_held else _report_unchanged
    _ = p | "NothingChanged" >> beam.Create([message]) | "Report" >> beam.Map(report)
    return p


def _run(
    plan: Plan, config: Config, beam_args: list[str], publication: VersionPublication, previous: str | None
) -> int:
    """Runs the conversion into the new version and reports how it ended."""
    root = publication.root
    started = time.monotonic()
    try:
        manifest = run_job(plan, config, beam_args, publication)
    except RunFailedError as e:
        held = None if e.rejected else publication.committed_held()
        if held is not None:  # a Dataflow job fails when it holds its version, once it committed it
            show(*run_summary(held, plan.output, time.monotonic() - started), *held_lines(publication.folder, held))
            return EXIT_HELD
        if e.rejected:
            show(*rejection_report(publication.folder, e.rejected))
        outcome = version_outcome(root, publication.run, previous)
        _LOG.error("%s", outcome.line("" if e.rejected else "; ".join(e.reasons()), publication.run))
        return EXIT_REJECTED if e.rejected else EXIT_FAILED
    if manifest is None:
        show(
            f"Refresh job staged: it converts into {plan.output} and, if the run passes its checks, "
            f"points {root}/LATEST at {publication.version}"
        )
        return 0
    show(*run_summary(manifest, plan.output, time.monotonic() - started))
    if manifest.held:
        show(*held_lines(publication.folder, manifest))
        return EXIT_HELD
    latest = latest_version(root)
    if latest != publication.version:
        _LOG.error("%s/LATEST names %s, not this run's %s: version not published", root, latest, publication.version)
        return EXIT_FAILED
    show(f"Published version {publication.version}: {root}/LATEST -> {publication.version}")
    return 0


def main(argv: list[str]) -> int:
    args, beam_args = parse_command_line(parser(), REFRESH_FLAGS, argv)
    run = new_run()
    try:
        refuse_unsafe_options(beam_args)
        if args.keep is not None and args.keep < 1:
            raise ConfigError("--keep must be at least 1")
        config = load_config(args.config, config_overrides(args))
        if not config.output:
            raise ConfigError("refresh needs --output ROOT (the folder that holds the versions and LATEST)")
        root = storage.absolute(config.output).rstrip("/")
        if args.promote is not None:
            return _promote(root, args.promote, Lease(root, run, config.lease_seconds))
        source = storage.absolute(config.input_uri)
        check_input(config, source)
        check_output(config.kind, source, root)
        published = check_folder_kind("refresh", root).latest  # what an interrupted run says LATEST still names
        check_other_refresh_files(root, config.allow_other_files)
        unattended = stages_only(PipelineOptions(beam_args))  # the job runs later, without this process
        lease = Lease(root, run, config.lease_seconds)
        if not unattended:
            take_lease(lease)
    except (ConfigError, LeaseHeldError, UnsafeOptionError, PreflightError) as e:
        _LOG.error("%s", e)
        return EXIT_REFUSED
    with saying_what_dest_holds(lambda: version_outcome(root, run, published), run), lease:
        return _refresh(beam_args, config, root, run, args.keep, unattended, lease)


def _promote(root: str, version: str, lease: Lease) -> int:
    """`--promote VERSION`: under ROOT's lease, points LATEST at a committed version a person chose."""
    was = check_folder_kind("refresh", root).latest
    if was == version:
        show(f"{root}/LATEST names {version} already: nothing to promote")
        return 0
    take_lease(lease)
    with lease, Fence(root, lease.run) as fence:
        try:
            promote(root, version, fence)
        except (NotPromotable, ManifestError) as e:
            committed = sorted(v for v, state in version_states(root).items() if state == "complete")
            _LOG.error("cannot promote: %s; %s's committed versions: %s", e, root, ", ".join(committed[-5:]) or "none")
            return EXIT_REFUSED
    show(f"Promoted version {version}: {root}/LATEST -> {version} (was {was or 'none'})")
    return 0


def _refresh(
    beam_args: list[str], config: Config, root: str, run: str, keep: int | None, unattended: bool, lease: Lease
) -> int:
    """Under the root's lease: plan, skip unchanged input, remove dead runs' versions, convert."""
    try:
        previous = latest_version(root)
        version = next_version([*storage.children(root), previous or ""])
        publication = VersionPublication(
            root,
            version,
            run,
            keep,
            unattended,
            previous,
            config.hold,
            lease_seconds=config.lease_seconds,
            on_dataflow="Dataflow" in runner_of(beam_args),
        )
        config = config.model_copy(update={"output": publication.folder, "overwrite": False})
        with SourceList() as listed:
            plan = make_plan(
                config,
                hand_over=runs_here(beam_args),
                local_files=reads_local_files(PipelineOptions(beam_args)),
                listed=listed,
            )
            if lease.held:  # under the lease no run writes but this one: what has no manifest, a dead run left
                with Fence(root, run) as fence:
                    remove_unfinished_versions(root, fence)
            manifest = previous_manifest(root, previous)
            message = unchanged_since(root, previous, manifest, plan, config) if manifest else None
            if message:
                show(message)
                if stages_only(pipeline_options(beam_args)):
                    unchanged_job(beam_args, message).run()
                return 0
            held = held_version(root, previous)
            if held is not None and unchanged_since(root, *held, plan, config):
                lines = held_lines(join(root, held[0]), held[1])
                show("Nothing changed since the last refresh, whose version is held.", *lines)
                if stages_only(pipeline_options(beam_args)):
                    unchanged_job(beam_args, " ".join(lines), still_held=True).run()
                return EXIT_HELD
            publication.prepare()
            listed.write(join(publication.folder, SOURCES_NAME))  # checked and named by the job's last step
        plan = dataclasses.replace(with_previous_ids(plan, manifest), sources_file=SOURCES_NAME)
    except (PlanError, LatestPointerError, OSError) as e:
        _LOG.error("%s", e)
        return EXIT_REFUSED
    if lease.held:
        lease.keep_renewed()
    _LOG.info(
        "refreshing %s: version %s from %d listed file(s) of %s (LATEST: %s)",
        root,
        publication.version,
        plan.listing.files,
        plan.input,
        previous or "none",
    )
    with convert_pool.started_ahead(converting_processes(runner_of(beam_args), config)):  # ReadImages' pool takes them
        return _run(plan, config, beam_args, publication, previous)
