"""Planning a run before it starts: list the sources once on the launcher to learn the label map,
the bytes per split (hence shard counts) and a fingerprint of the listing.

Planning holds neither the listing nor the rows: counts, bytes per split, labels and the listing's
fingerprint accumulate as entries stream (pipeline.listing_digest), in whatever order they come;
gs:// folders are listed with `listing_threads` list requests in flight, a large folder in name
ranges side by side (core.range_listing); and an image CSV's rows are kept as a few bytes each
(pipeline.image_csv_plan).

The job lists again inside the pipeline (so its graph stays the same size for 10 or 10 million
files); both sides classify with `transforms.sources.ClassFolders`. A job that runs in this
process takes the planner's classified listing of class folders instead (`transforms.listing_handover`).
"""

from __future__ import annotations

import collections
import contextlib
import csv
import dataclasses
import difflib
import functools
import gc
import logging
import math
import zlib

import numpy as np

from core import storage
from core.contract.layout import GZIP, TFRECORD, ShardedFileTemplate, join, record_files
from core.contract.manifest import Listing
from core.local_files import NotARegularFile
from core.shown import quoted
from pipeline.config import Config, CsvConfig
from pipeline.image_csv_plan import RowTable, found_images, names_of
from pipeline.listing_digest import ListingDigest
from pipeline.sharding import shard_count
from pipeline.source_list import SourceList
from pipeline.stored_size import SourceSample, stored_fraction
from transforms import listing_handover, progress
from transforms.csv_dialect import AUTO, CsvDialect, DialectError, header_warnings
from transforms.csv_records import WHOLE_CSV, CsvPart, CsvRecords
from transforms.folder_layout import (
    CLASS_FOLDER_LAYOUT,
    CLASS_FOLDERS,
    LAYOUT_FLAG,
    FolderLayout,
    LayoutError,
    detect_layout,
)
from transforms.outcomes import DeadLetter, Skipped, Source
from transforms.sources import ClassFolders, CsvRow, ImageCsvLayoutError, Roots, image_csv_rows, printable_path
from transforms.splits import misspelt
from transforms.tabular import MAX_COLUMNS, hidden_match, image_path_columns, read_header

_LOG = logging.getLogger(__name__)
SOURCES_PER_PERMUTE_BUCKET = 100_000
CSV_BYTES_PER_PERMUTE_BUCKET = 64 << 20
CSV_PART_BYTES = 32 << 20  # an image CSV's rows are read in parts of about this size, side by side
LABEL_COLUMN = "label"  # the label column of a table whose csv.label is auto, where it has one


class PlanError(ValueError):
    """The input cannot be converted at all (nothing to list, unreadable header, ...)."""


@dataclasses.dataclass(frozen=True)
class PlannedInput:
    """What listing one kind of input tells before the run."""

    label_map: tuple[str, ...]  # image kinds only
    columns: tuple[str, ...]  # tabular only
    split_bytes: dict[str, int]
    listing: Listing
    permute_buckets: int
    listed_here: str | None = None  # the key of the classified listing kept for the job
    dialect: CsvDialect = CsvDialect()  # tabular: how every file is read (transforms.csv_dialect)
    csv_parts: tuple[CsvPart, ...] = WHOLE_CSV  # image CSV: read part by part, side by side
    csv_size: int = 0  # image CSV: its size, which its parts were cut in
    images: int | None = None  # image kinds: the images the job will convert
    folder_layout: FolderLayout = CLASS_FOLDER_LAYOUT  # images: class folders or split folders
    warnings: tuple[str, ...] = ()  # what a user of the data should hear of what planning decided
    label_column: str = ""  # tabular: the column of each row's class or target (csv.label)
    sample: tuple[str, ...] = ()  # image kinds stored resized: sources to size its shards by (pipeline.stored_size)


@dataclasses.dataclass(frozen=True)
class Plan:
    kind: str
    input: str  # absolute for local paths, so keys below it are stable
    output: str
    label_map: tuple[str, ...]
    columns: tuple[str, ...]  # tabular only
    split_bytes: dict[str, int]
    shards: dict[str, int]
    listing: Listing
    permute_buckets: int
    compression: str = GZIP  # the manifest's spelling: GZIP or NONE
    index: bool = False  # write a record index beside each shard
    listed_here: str | None = None  # the key of the classified listing kept for the job (listing_handover)
    kept_labels: int = (
        0  # a refresh: the label map's first ids, kept from the previous version (transforms.label_column.kept_ids)
    )
    dialect: CsvDialect = CsvDialect()  # tabular: how every file is read (transforms.csv_dialect)
    csv_parts: tuple[CsvPart, ...] = WHOLE_CSV  # image CSV: read part by part, side by side
    csv_size: int = 0  # image CSV: its size, which its parts were cut in
    images: int | None = None  # image kinds: the images the job will convert (its progress' total)
    file_format: str = TFRECORD  # the manifest's spelling: tfrecord or array_record
    folder_layout: FolderLayout = CLASS_FOLDER_LAYOUT  # images: class or split folders (transforms.folder_layout)
    warnings: tuple[str, ...] = ()  # what a user of the data should hear of what planning decided (the manifest's)
    label_column: str = ""  # tabular: the column of each row's class or target (csv.label)
    sources_file: str = ""  # a refresh: the sources file written into its version (pipeline.source_list)

    @property
    def record_files(self) -> ShardedFileTemplate:
        return record_files(self.compression, self.file_format)

    @property
    def layout(self) -> dict:
        """How the input is read, as decided before the run (the manifest's inputs.layout)."""
        if self.kind == "images":
            return self.folder_layout.described()
        return self.dialect.described() if self.kind == "csv" else {}


HAND_OVER_LIMIT = 200_000  # classified entries kept for a job in this process; beyond, it lists again


def folder_layout(config: Config, root: str) -> FolderLayout:
    """The layout of the image folders below `root` (image.layout, or as their names show); a
    PlanError where it cannot be decided, or where split folders meet a `splits` setting, which
    they leave nothing to decide."""
    try:
        layout = detect_layout(
            storage.folder_names(root),
            config.image.layout,
            lambda folder: storage.folder_names(join(root, folder)),
            printable_path(root),
        )
    except LayoutError as e:
        raise PlanError(f"{root}: {e}") from e
    if layout.split_folders and "splits" in config.model_fields_set:
        folders = ", ".join(f"{folder}/" for folder, _ in layout.split_folders)
        raise PlanError(
            f"{root} holds split folders ({folders}), which give each image its split: leave out --splits (and "
            f"the config's splits), or hash the images of every folder into splits with {LAYOUT_FLAG} {CLASS_FOLDERS}"
        )
    if layout.split_folders:
        _LOG.info(
            "%s: split folders %s (image.layout: %s)",
            root,
            ", ".join(f"{folder}/ -> {split}" for folder, split in layout.split_folders),
            config.image.layout,
        )
    return layout


def _plan_class_folders(config: Config, root: str, hand_over: bool, listed: SourceList | None) -> PlannedInput:
    layout = folder_layout(config, root)
    classify = ClassFolders(root, config.image.extensions, config.split_fractions, layout).listed
    split_bytes = {name: 0 for name in layout.splits or config.splits}
    labels, sources, digest, skipped = set(), 0, ListingDigest(_sink(listed)), collections.Counter()
    kept: list | None = [] if hand_over else None
    sample = _sample(config)
    listing = progress.Phase("listing", "files")
    for entry in progress.counted(storage.list_below(root, config.listing_threads), listing):
        outcome = classify(entry)
        if kept is not None:
            kept.append(outcome)
            if len(kept) > HAND_OVER_LIMIT:  # memory stays bounded: the job lists again
                kept = None
        if isinstance(entry, storage.Unlisted):
            digest.add_unlisted(outcome.source)
            if isinstance(outcome, DeadLetter):  # not a hidden one, which is skipped
                _LOG.warning("cannot list %s: %s", outcome.source, entry.reason)
            continue
        digest.add(printable_path(entry.path), entry.size_in_bytes, entry.last_updated_in_seconds)
        if isinstance(outcome, Source):
            sources += 1
            labels.add(outcome.label)
            split_bytes[outcome.split] += entry.size_in_bytes
            if sample is not None:
                sample.offer(outcome.uri)
        elif isinstance(outcome, Skipped):
            skipped[outcome.extension] += 1
    listing.finish()
    if not sources:
        found = ", ".join(f"{extension} {n:,}" for extension, n in skipped.most_common(5))
        raise PlanError(
            f"no images in class folders below {root} ({digest.files} file(s) listed"
            + (f", by extension: {found}" if found else "")
            + (f", {digest.unlisted} folder(s) or link(s) that cannot be listed" if digest.unlisted else "")
            + f"; the image extensions read, image.extensions in a --config file: {' '.join(config.image.extensions)})"
        )
    # Every listed file, and everything that could not be listed, is a source the job must
    # account for (record, skip or dead letter).
    return PlannedInput(
        tuple(sorted(labels)),
        (),
        split_bytes,
        _listing(digest, digest.files + digest.unlisted),
        math.ceil(sources / SOURCES_PER_PERMUTE_BUCKET),
        listing_handover.keep(kept) if kept is not None else None,
        images=sources,
        folder_layout=layout,
        sample=tuple(sample.uris) if sample is not None else (),
    )


def _sample(config: Config) -> SourceSample | None:
    """Where the sources a resized dataset's shards are sized by are kept (pipeline.stored_size)."""
    return SourceSample() if config.image.resize.bound.enabled else None


def _stored_fraction(config: Config, sample: tuple[str, ...]) -> float:
    """What the records store per byte of their sources: 1, but for images stored resized, which
    `sample` of them measures (pipeline.stored_size)."""
    image = config.image
    if not sample:
        return 1.0
    fraction = stored_fraction(list(sample), image.max_pixels, image.encoding, image.max_file_mib << 20)
    if fraction is None:
        return 1.0
    _LOG.info(
        "images stored resized (image.resize): about %.0f%% of their sources' bytes, as %d of them show; "
        "shards sized for that",
        100 * fraction,
        len(sample),
    )
    return fraction


def _sink(listed: SourceList | None):
    """What the listing's digest hands each entry to: `listed`, a refresh's sources file to be."""
    return listed.add if listed is not None else None


def _listing(digest: ListingDigest, sources: int | None) -> Listing:
    return Listing(files=digest.files, bytes=digest.bytes, fingerprint=digest.fingerprint, sources=sources)


@contextlib.contextmanager
def _refused(*errors: type[Exception]):
    """`errors` raised inside, as the PlanError (exit 2) they are: an input the run cannot read."""
    try:
        yield
    except errors as e:
        raise PlanError(str(e)) from e


def _plan_image_csv(config: Config, csv_uri: str, local_files: bool, listed: SourceList | None) -> PlannedInput:
    csv_metadata = storage.stat(csv_uri)
    if csv_metadata is None:
        raise PlanError(f"image CSV {csv_uri} not found")
    c = config.image_csv
    roots = Roots(c.roots, local_files)  # rows are confined as the job confines them
    table, rows, first_dead = RowTable(), 0, None
    parts, part = [], CsvPart(0, 0, None)
    cut = CSV_PART_BYTES if not storage.is_gzip(csv_uri) else None  # a GZIP stream is read from its start
    sample = _sample(config)
    listing = progress.Phase("listing", "rows")
    with storage.open_text(csv_uri, errors="surrogateescape", inside=None) as text, _refused(ImageCsvLayoutError):
        records = CsvRecords(text)
        csv_rows = image_csv_rows(
            records, csv_uri, c.uri_column, c.label_column, c.split_column, config.split_fractions, roots
        )
        for row in progress.counted(csv_rows, listing):
            rows += 1
            if isinstance(row, CsvRow):
                table.add(row.source)
                if sample is not None:
                    sample.offer(row.source.uri)
            else:
                first_dead = first_dead or row
            if cut and records.part_may_start and records.offset - part.start >= cut:  # the next row starts a part
                parts.append(part._replace(end=records.offset))
                part = CsvPart(records.offset, records.line, None)
    listing.finish()
    parts.append(part)
    # Sizes come from listing each folder the CSV points into (one list call per folder, not one
    # request per image), as the job's check does (`check_images_exist`): an image that does not
    # exist (or whose bucket does not exist) counts for neither bytes nor labels, and is a dead
    # letter in the job.
    digest = ListingDigest(_sink(listed))
    digest.add(csv_metadata.path, csv_metadata.size_in_bytes, csv_metadata.last_updated_in_seconds)
    images = found_images(table, config.listing_threads, digest)
    if not len(images):
        such = f", such as {first_dead.source}: {first_dead.reason}" if first_dead else ""
        raise PlanError(
            f"no image rows in {csv_uri}: its {rows} row(s) are dead letters{such}"
            if rows
            else f"no image rows in {csv_uri}"
        )
    found = images.found
    split_bytes = {name: 0 for name in config.splits}
    for split, size in zip(
        names_of(range(len(table.splits)), table.splits),
        np.bincount(images.splits[found], weights=images.sizes[found], minlength=len(table.splits)),
        strict=True,
    ):
        split_bytes[split] = split_bytes.get(split, 0) + int(size)
    return PlannedInput(
        tuple(sorted(names_of(np.unique(images.labels[found]), table.labels))),
        (),
        split_bytes,
        _listing(digest, rows),
        math.ceil(len(images) / SOURCES_PER_PERMUTE_BUCKET),
        csv_parts=tuple(parts),
        csv_size=csv_metadata.size_in_bytes,
        images=int(found.sum()),
        sample=tuple(sample.uris) if sample is not None else (),
    )


def _plan_tabular(config: Config, pattern: str, listed: SourceList | None) -> PlannedInput:
    digest, paths, unlisted, hidden = ListingDigest(_sink(listed)), [], {}, []
    listing = progress.Phase("listing", "files")
    for entry in progress.counted(storage.list_matching(pattern), listing):
        if hidden_match(pattern, entry.path):  # the job skips it: no header, no bytes
            hidden.append(printable_path(entry.path))
        elif isinstance(entry, storage.Unlisted):  # a dangling link, a folder: the job's `list` dead letter
            path = printable_path(entry.path)
            unlisted[path] = entry.reason
            digest.add_unlisted(path)
            _LOG.warning("cannot list %s: %s", path, entry.reason)
        else:
            paths.append(entry.path)
            digest.add(entry.path, entry.size_in_bytes, entry.last_updated_in_seconds)
    listing.finish()
    if hidden:
        _LOG.info("%s matches %d hidden file(s), which are skipped, such as %s", pattern, len(hidden), min(hidden))
    if not paths and not unlisted:
        left_out = f"; hidden files are left out: {len(hidden)}, such as {min(hidden)}" if hidden else ""
        raise PlanError(f"no CSV files match {pattern}{left_out}")
    named = [f"{path}: {reason}" for path, reason in sorted(unlisted.items())]
    first, (columns, dialect) = _first_header(sorted(paths), pattern, named, config.csv)
    if not columns:
        raise PlanError(f"{first} has no header line")
    if len(columns) > MAX_COLUMNS:
        raise PlanError(
            f"{first}: its header names {len(columns):,} columns, more than the {MAX_COLUMNS:,} a dataset may have"
        )
    unnamed = [number for number, name in enumerate(columns, 1) if not name.strip()]
    if unnamed:
        raise PlanError(
            f"{first}: its header leaves column(s) {quoted(unnamed)} (counting from 1) without a name, which every "
            "column needs as its feature's key (a pandas index, written by to_csv without index=False?): name them, "
            "or write the files without them"
        )
    repeated = sorted(name for name, count in collections.Counter(columns).items() if count > 1)
    if repeated:
        raise PlanError(
            f"{first}: its header names column(s) {quoted(repeated)} more than once; each column is the feature of its "
            "name, so all but one of them would be lost: rename them"
        )
    undeclared = set(config.csv.schema) - set(columns)
    if undeclared:
        raise PlanError(
            f"csv.schema names columns the data lacks: {quoted(sorted(undeclared))} (header: {quoted(columns)})"
        )
    if config.csv.delimiter != dialect.delimiter:
        _LOG.info("%s: its fields are separated by %s (csv.delimiter: auto)", first, quoted(dialect.delimiter))
    warnings = header_warnings(dialect, columns, bool(config.csv.columns)) if config.csv.header == AUTO else []
    paths = image_path_columns(first, columns, dialect, config.image.extensions)
    if paths:
        warnings.append(
            f"column(s) {quoted(paths)} hold paths of image files, which a table stores as text: to convert the "
            "images they name, give the CSV with --kind image_csv"
        )
    label = config.csv.label
    if label not in (AUTO, "") and label not in columns:
        close = difflib.get_close_matches(label, columns, n=1)
        raise PlanError(
            f"--label (csv.label) names column {quoted(label)}, which {first} lacks"
            + (f": did you mean {quoted(close[0])}?" if close else "")
            + f" (columns: {quoted(columns)})"
        )
    label = (LABEL_COLUMN if LABEL_COLUMN in columns else "") if label == AUTO else label
    total = digest.bytes
    split_bytes = {name: int(total * fraction) for name, fraction in config.splits.items()}
    return PlannedInput(
        (),
        columns,
        split_bytes,
        _listing(digest, None),
        math.ceil(total / CSV_BYTES_PER_PERMUTE_BUCKET),
        dialect=dialect,
        warnings=tuple(warnings),
        label_column=label,
    )


def _first_header(
    paths: list[str], pattern: str, unlisted: list[str], settings: CsvConfig
) -> tuple[str, tuple[tuple[str, ...], CsvDialect]]:
    """The first regular file and its header, which names the dataset's columns, with the dialect
    every file is read with (csv.delimiter, or the one its header and first rows show; csv.decimal).
    A FIFO or device before it is passed over (the job makes it a dead letter), so whether the run
    goes ahead does not depend on how the names sort; with no regular file at all, the run is
    refused, naming what matched instead (`unlisted`: 'path: reason' of each match that cannot be
    listed)."""
    passed_over = list(unlisted)
    for path in paths:
        try:
            return path, read_header(path, settings.delimiter, settings.decimal, settings.header, settings.columns)
        except NotARegularFile as e:
            passed_over.append(f"{path}: {e}")
        except DialectError as e:
            raise PlanError(f"{path}: {e}") from e
        except (OSError, EOFError, zlib.error, csv.Error, ValueError) as e:
            raise PlanError(f"{path}: cannot read its header, which names the dataset's columns: {e}") from e
    more = f" and {len(passed_over) - 3} more" if len(passed_over) > 3 else ""
    raise PlanError(f"no regular file matches {pattern} ({'; '.join(passed_over[:3])}{more})")


@contextlib.contextmanager
def _loaded_objects_frozen():
    """Planning with the objects alive before it (the imported modules: Beam, google-cloud, ...)
    left out of Python's full collections: a listing of millions of entries makes its own objects
    by the million, each of which would otherwise count towards a full collection that walks every
    loaded object again. They are handed back to the collector when planning ends."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def make_plan(
    config: Config, hand_over: bool = False, local_files: bool = True, listed: SourceList | None = None
) -> Plan:
    """The plan of a run of `config`. `hand_over`: the job will run in this process, so keep the
    planner's classified listing of class folders for its listing step (listing_handover).
    `local_files`: the job's workers read this machine's files (runners.reads_local_files).
    `listed`: collects every entry listed (a refresh's sources file, pipeline.source_list)."""
    source = storage.absolute(config.input_uri)
    planner = {
        "images": functools.partial(_plan_class_folders, hand_over=hand_over, listed=listed),
        "image_csv": functools.partial(_plan_image_csv, local_files=local_files, listed=listed),
        "csv": functools.partial(_plan_tabular, listed=listed),
    }[config.kind]
    with _loaded_objects_frozen():
        planned = planner(config, source)
    shards = {name: shard_count(size, config.sharding) for name, size in planned.split_bytes.items()}
    if any(count > 1 for count in shards.values()):  # one shard each: storing less changes nothing
        stored = _stored_fraction(config, planned.sample)
        shards = {name: shard_count(round(n * stored), config.sharding) for name, n in planned.split_bytes.items()}
    listing = planned.listing
    _LOG.info("planned %s: %d file(s), %.1f MB; shards %s", source, listing.files, listing.bytes / 1e6, shards)
    for name, meant in misspelt(list(config.splits)).items():
        _LOG.warning(
            "split %s (--splits) is not %s: a typo? readers and the trainer look for %s-* by default",
            quoted(name),
            quoted(meant),
            meant,
        )
    return Plan(
        config.kind,
        source,
        storage.absolute(config.output_uri),
        planned.label_map,
        planned.columns,
        planned.split_bytes,
        shards,
        listing,
        max(1, planned.permute_buckets),
        config.compression.upper(),
        config.index,
        planned.listed_here,
        dialect=planned.dialect,
        csv_parts=planned.csv_parts,
        csv_size=planned.csv_size,
        images=planned.images,
        file_format=config.format,
        folder_layout=planned.folder_layout,
        warnings=planned.warnings,
        label_column=planned.label_column,
    )
