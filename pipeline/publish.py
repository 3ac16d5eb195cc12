"""The job's last step: build the manifest once every shard has been read back and the error report
is final, check the run, and hand the manifest to the run's Publication (a dataset folder, or a
refresh's new version), with the reasons not to trust it in `rejected` when there are any.

It runs inside the job (not on the launcher) so that a job launched from a template, whose
launcher does not wait, still ends with a manifest.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import logging
from collections.abc import Mapping
from typing import Protocol

import apache_beam as beam

import pipeline
from core import storage
from core.array_record_files import WRITER_OPTIONS
from core.contract.features import IMAGE_KEY_DTYPES
from core.contract.layout import (
    ARRAY_RECORD,
    INDEX_FOLDER,
    MANIFEST_NAME,
    REJECTED_MANIFEST_NAME,
    SOURCES_NAME,
    STATISTICS_NAME,
    UNCOMPRESSED,
    index_file,
    join,
)
from core.contract.manifest import Counts, FeatureSpec, Manifest, SplitInfo
from core.evidence import OwnFolder
from pipeline.job_lease import JobLease
from pipeline.label_map import (
    alike_labels_warnings,
    empty_labels_warnings,
    missing_from_split_warnings,
    new_labels_warnings,
    one_class_warnings,
)
from pipeline.planning import Plan
from pipeline.readback import shard_problems
from pipeline.shard_check import ShardCount
from pipeline.source_list import sources_problems
from pipeline.statistics_file import statistics_bytes, statistics_problems
from pipeline.tfds_metadata import TfdsMetadataError, tfds_metadata
from transforms import stopping
from transforms.counting import counter
from transforms.outcomes import WHOLE_FILE_STAGES, OutcomeSummary
from transforms.tabular import ColumnType, schema_warnings

_LOG = logging.getLogger(__name__)


class Publication(Protocol):
    """Where a finished run's manifest goes. `publish` runs on a worker, so it is pickled into the
    job; `prepare`, `rejected` and `clean_up_failed` run on the launcher."""

    folder: str  # the run's own folder, where the job writes its shards and error report
    run: str  # the run's name (core.contract.versions.new_run), recorded in the manifest
    job_lease: JobLease | None  # the lease the job takes itself, when nobody waits for it (pipeline.job_lease)

    def prepare(self) -> None:
        """Makes the run's own folder, before the job runs."""

    def publish(self, manifest: Manifest, files: Mapping[str, bytes] | None = None) -> None:
        """Commits a trusted manifest, with `files` (by name: the statistics) written beside the
        records before it; records one whose `rejected` is not empty as rejected. Raises
        pipeline.lease.LeaseLost, touching nothing, when the run no longer holds its lease."""

    def rejected(self) -> Manifest | None:
        """This run's rejected manifest, if `publish` recorded one."""

    def clean_up_failed(self) -> Manifest | None:
        """After a failed job: removes what it wrote, except a rejected run's report; returns the
        rejected manifest, if the job got that far."""


def reader_metadata(folder: str, manifest: Manifest) -> dict[str, str]:
    """What other readers need beside an uncompressed dataset in `folder` (TFDS metadata), by
    file name. A dataset TFDS cannot describe (keys `a` and `a/b`, ...) still publishes, with a
    warning: every other reader can read it."""
    if manifest.compression != UNCOMPRESSED:
        return {}
    try:
        return tfds_metadata(manifest)
    except TfdsMetadataError as e:
        _LOG.warning("%s: no TFDS metadata: %s", folder, e)
        return {}


class JobOutcome(RuntimeError):
    """Fails a job whose launcher does not wait for it (a template launch) with its run's outcome
    (rejected, held, not published), so a scheduler's alerting on failed jobs sees it. No retry
    changes it, so the job's lease goes first (PublishManifest)."""


class RunRejectedError(JobOutcome):
    """The run was rejected."""


def write_rejection(folder: str, manifest: Manifest) -> None:
    """An untrusted run, in its own `folder` (made new by it): manifest.rejected.json (never
    manifest.json) and its error report stay; its shards (and indexes) go, so nothing can read
    them as data, and so does a refresh's sources file, which only a published version keeps."""
    storage.write_atomically(join(folder, REJECTED_MANIFEST_NAME), manifest.to_json())
    records = [join(folder, f) for split in manifest.splits.values() for f in (*split.shards, *split.index_files)]
    storage.delete([*records, join(folder, INDEX_FOLDER), join(folder, SOURCES_NAME)], OwnFolder(folder))


def report_rejection(folder: str, manifest: Manifest, fail_job: bool) -> None:
    """Says that the run recorded in `folder` was rejected. `fail_job`: nobody waits for the job to
    report it, so the job fails with the reasons; otherwise the waiting launcher reports them, once
    (pipeline.report.rejection_report), and exits 1."""
    counter("runs_rejected").inc()
    if fail_job:
        raise RunRejectedError(f"{folder} not published: " + "; ".join(manifest.rejected))
    _LOG.info("%s: run rejected, recorded in %s", folder, REJECTED_MANIFEST_NAME)


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What the manifest records of how the run was asked for."""

    run: str
    options: dict
    image_keys: dict[str, str]
    max_error_fraction: float
    label_offset: int = 0  # images: added to every label id


def feature_specs(image_keys: dict[str, str], schema: dict[str, ColumnType] | None) -> dict[str, FeatureSpec]:
    """Image datasets have the fixed image keys; tabular ones one feature per column, optional
    when some record lacks it. Declared booleans and a string label column's class ids are int64."""
    if schema is None:
        return {key: FeatureSpec(key, IMAGE_KEY_DTYPES[role]) for role, key in image_keys.items()}
    return {name: FeatureSpec(name, col.stored_dtype, (), col.missing == 0) for name, col in schema.items()}


def build_manifest(
    plan: Plan,
    settings: RunSettings,
    summary: OutcomeSummary,
    counted: list[ShardCount],
    error_files,
    schema: dict[str, ColumnType] | None,
    created: str,
    copies_files=(),
) -> Manifest:
    shards = sorted((c.name, c.records) for c in counted)
    splits = {}
    for name in plan.shards:
        own = [(shard, records) for shard, records in shards if plan.record_files.is_shard_of(shard, name)]
        splits[name] = SplitInfo(
            name=name,
            records=summary.written.get(name, 0),
            shards=tuple(shard for shard, _ in own),
            bytes=summary.bytes.get(name, 0),
            label_counts=dict(sorted(summary.labels.get(name, {}).items())),
            shard_lengths=tuple(records for _, records in own),
            index_files=tuple(index_file(shard) for shard, _ in own) if plan.index else (),
        )
    written, skipped, errors = (sum(counts.values()) for counts in (summary.written, summary.skipped, summary.errors))
    counts = Counts(
        listed=written + skipped + errors, written=written, converted=summary.converted, skipped=skipped, errors=errors
    )
    candidates = counts.listed - counts.skipped
    label_map = (
        plan.label_map if schema is None else (schema[plan.label_column].classes or ()) if plan.label_column else ()
    )
    return Manifest(
        kind=plan.kind,
        splits=splits,
        features=feature_specs(settings.image_keys, schema),
        counts=counts,
        label_map=label_map,
        label_column=plan.label_column,
        label_offset=settings.label_offset if schema is None else 0,
        error_files=tuple(sorted(storage.basename(f) for f in error_files)),
        copies_files=tuple(sorted(storage.basename(f) for f in copies_files)),
        errors_by_stage=dict(sorted(summary.errors.items())),
        skipped_by_extension=dict(sorted(summary.skipped.items())),
        max_error_fraction=settings.max_error_fraction,
        error_fraction=errors / candidates if candidates else 0.0,
        image_keys=dict(settings.image_keys) if schema is None else {},
        inputs={"input": plan.input, "kind": plan.kind, "columns": list(plan.columns), "layout": plan.layout},
        options={
            **settings.options,
            "planned_shards": plan.shards,
            "planned_split_bytes": plan.split_bytes,
            **({"planned_delimiter": plan.dialect.delimiter} if plan.kind == "csv" else {}),
        },
        listing=plan.listing,
        package_version=pipeline.__version__,
        created=created,
        compression=plan.compression,
        file_format=plan.file_format,
        array_record_options=WRITER_OPTIONS if plan.file_format == ARRAY_RECORD else "",
        run=settings.run,
        warnings=(
            *plan.warnings,
            *schema_warnings(schema or {}),
            *summary.warnings(),
            *one_class_warnings(label_map),
            *alike_labels_warnings(label_map),
            *empty_labels_warnings(label_map, summary.labels),
            *missing_from_split_warnings(summary.labels),
            *new_labels_warnings(label_map, plan.kept_labels),
        ),
    )


def problems(plan: Plan, manifest: Manifest, counted: list[ShardCount], written: list[str]) -> list[str]:
    """Why a finished run must not be trusted (empty when it can)."""
    produced = {name: split.records for name, split in manifest.splits.items()}
    found = shard_problems(
        plan.record_files, plan.shards, produced, counted, sorted(storage.basename(f) for f in written)
    )
    expected = plan.listing.sources
    if expected is not None and manifest.counts.listed != expected:
        found.append(
            f"the job accounted for {manifest.counts.listed} sources but {expected} were listed before it ran: "
            "the input changed during the run, or the runner lost sources before the job counted them"
        )
    if manifest.counts.written == 0:
        c = manifest.counts
        found.append(
            f"no source became a record ({c.listed} listed: {c.errors} failed, {c.skipped} skipped"
            + (", and the input holds no data rows" if not c.listed and plan.kind == "csv" else "")
            + "): a dataset without records is not published"
        )
    if manifest.error_budget_exceeded:
        found.append(over_budget(manifest))
    return found


def over_budget(manifest: Manifest) -> str:
    """Why a run over its error budget is rejected. Errors of a cause a whole file shares (a CSV's
    header: WHOLE_FILE_STAGES) are named with their fix; a larger budget would only drop those
    files' rows. The budget that would let the others pass, those that failed one by one, is
    suggested only when they alone exceed the budget (then it is what the run needs once the files
    are fixed), and never when no record was written (no budget helps). Where the errors are is the
    rejection report's to say (pipeline.report)."""
    c = manifest.counts
    reason = (
        f"{c.errors} of {c.listed - c.skipped} sources failed ({100 * manifest.error_fraction:.2f}%), over the "
        f"error budget of {100 * manifest.max_error_fraction:.2f}% (--max_error_fraction {manifest.max_error_fraction})"
    )
    whole = sum(n for stage, n in manifest.errors_by_stage.items() if stage in WHOLE_FILE_STAGES)
    if whole:
        reason += (
            f": {whole} of them for their CSV file's header, which differs from the dataset's or cannot be read (the "
            "errors name each file, and how): give those files the dataset's header, or leave them out of --input; "
            "a larger --max_error_fraction would only drop their rows"
        )
    one_by_one = (c.errors - whole) / (c.listed - c.skipped)
    if c.written and one_by_one > manifest.max_error_fraction:
        if whole:
            reason += f"; the other {c.errors - whole} failed one by one: once the headers match, "
            reason += f"--max_error_fraction {passing_budget(one_by_one)} would let them pass"
        else:
            reason += f"; --max_error_fraction {passing_budget(one_by_one)} would have let them pass"
    return reason


def passing_budget(error_fraction: float) -> str:
    """The smallest --max_error_fraction of two significant digits that lets `error_fraction` pass
    Manifest.error_budget_exceeded (a budget fails only a fraction above it), as the flag's text.
    Rounded up from the fraction's shortest decimal (repr), whose float is the fraction itself, so
    the flag parses to a budget at least the fraction, and less than a tenth above it."""
    shortest = decimal.Decimal(repr(error_fraction))
    unit = decimal.Decimal(1).scaleb(shortest.adjusted() - 1)  # of the second significant digit
    budget = (shortest / unit).to_integral_value(rounding=decimal.ROUND_CEILING) * unit
    return f"{budget.normalize():f}"


class PublishManifest(beam.DoFn):
    """Builds the manifest from the run's summary, the shards as read back and the error report,
    and publishes it, with the problems found in `rejected` (`publication` decides what an
    untrusted run gets). A job lease is released here when the job fails with its outcome, and by
    the step after this one when it published (pipeline.job_lease.released): a runner that runs
    this step again (a retried bundle) finds it still held."""

    def __init__(self, plan: Plan, settings: RunSettings, publication: Publication):
        self.plan, self.settings, self.publication = plan, settings, publication

    def process(self, _, summary: OutcomeSummary, counted, shard_files, error_files, schema, copies_files):
        stopping.check()  # a stopped run publishes nothing
        created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        manifest = build_manifest(
            self.plan, self.settings, summary, counted, error_files, schema, created, copies_files
        )
        statistics = statistics_bytes(summary.statistics)
        found = problems(self.plan, manifest, counted, shard_files) + statistics_problems(statistics, manifest)
        if self.plan.sources_file:  # a refresh's, written by its launcher into the version
            listed = join(self.publication.folder, self.plan.sources_file)
            found += sources_problems(listed, self.publication.folder, self.plan.listing)
        try:
            if found:  # a rejected run keeps its error report only
                self.publication.publish(dataclasses.replace(manifest, rejected=tuple(found)))
            else:
                manifest = dataclasses.replace(
                    manifest, statistics_file=STATISTICS_NAME, sources_file=self.plan.sources_file
                )
                self.publication.publish(manifest, {STATISTICS_NAME: statistics})
        except JobOutcome:
            if self.publication.job_lease is not None:
                self.publication.job_lease.release()
            raise
        yield join(self.plan.output, MANIFEST_NAME)
