"""Turning listings into Sources: class folders and CSVs of image URIs.

The classification functions are pure so the planner (which sizes shards before the run) and the
pipeline (which lists again inside the job, keeping the job graph small) decide identically.

Every non-blank row of an image CSV is a listed source. A row whose URI has a scheme no Beam
filesystem here reads (http://, https://) or whose split value is unknown (not TRAIN/VALIDATION/
TEST, UNASSIGNED/empty or a configured split) is a `parse` dead letter; an image that does not
exist (or whose gs:// bucket does not exist) a `read` one. Rows listing the same image URI are
grouped: identical ones (same label and split) give one record and a `duplicate` dead letter per
later row ("duplicate row of line N"); rows that disagree give no record and a `conflict` dead
letter each, naming the other lines. A UTF-8 BOM at the start of any CSV is dropped
(transforms.csv_records).
A row may name an image only below the CSV's folder or a configured root (`confinement_problem`):
an absolute path, a `..` or a link out of it is a `parse` dead letter, and so is every local path
on a runner whose workers are not this machine.

A name starting with "." below a class-folder input is not data (`.ipynb_checkpoints/`, `.git/`,
a class's `.thumbnails/`, macOS's `._photo.jpg` resource forks and `.DS_Store`): such a file, and
every file below such a folder, is skipped and counted as `(hidden)`, so it never becomes a
class, a record or a dead letter. Keras' `image_dataset_from_directory` leaves hidden class
folders out too.

A class-folder listing reports what it cannot list (an unreadable folder, a link it does not
follow: `storage.list_below`) as one dead letter each, stage "list", and an image whose name is
not valid UTF-8 as a dead letter naming it with its undecodable bytes escaped (backslashreplace):
it has no text key to label, hash or record it by. Both count as listed sources, on the
planner's side too.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import posixpath
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import FileMetadata

from core import storage
from core.contract.layout import join
from core.shown import is_text, quoted
from transforms import listing_handover, progress
from transforms.counting import counter
from transforms.csv_records import CsvPart, CsvRecords, unreadable_row
from transforms.folder_layout import CLASS_FOLDER_LAYOUT, FolderLayout
from transforms.outcomes import DEAD_LETTERS, SKIPPED, DeadLetter, Skipped, Source
from transforms.splits import SPLIT_NAMES, SplitAssigner, check_split_name

Outcome = Source | Skipped | DeadLetter

# Split values that mean "hash it" (AutoML's UNASSIGNED); the others are SPLIT_NAMES or a configured split.
_UNASSIGNED = {"", "unassigned"}
# The other rows a conflict's dead letter names (a count says how many more): enough to find them.
CONFLICTS_NAMED = 10


def extension_of(path: str) -> str:
    """Lower-case extension ('.jpg'), or '' for names like '.DS_Store' and 'README': as
    posixpath.splitext finds it in the base name, without its calls (once per listed file)."""
    name = path[path.rfind("/") + 1 :]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 and name[:dot].lstrip(".") else ""


def relative_key(root: str, path: str) -> str:
    """The path below the input root, with '/' separators, used for labels and split hashing."""
    root = root.rstrip("/")
    if not path.startswith(root + "/"):
        raise ValueError(f"{path} is not below {root}")
    return path[len(root) + 1 :]


def printable_path(path: str) -> str:
    """The path as text that can be written anywhere: bytes of a non-UTF-8 name (which Python
    carries as surrogate escapes) as \\xNN."""
    if path.isascii():  # most names: nothing to escape, and no encoding round trip
        return path
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


HIDDEN = "(hidden)"  # what a hidden entry is skipped as, in place of an extension


def is_hidden(key: str) -> bool:
    """Whether a path below the input (`cat/.thumbs/1.jpg`) names a hidden file or folder."""
    return key.startswith(".") or "/." in key


class ClassFolders:
    """Classifies what a listing of labelled image folders below `root` finds, for the planner and
    the job alike, in the input's `layout` (transforms.folder_layout: class folders, or split
    folders holding class folders); what every entry shares (the extensions, the split bounds) is
    worked out once, as a listing may hold millions of entries."""

    def __init__(
        self,
        root: str,
        extensions: Iterable[str],
        fractions: Sequence[tuple[str, float]],
        layout: FolderLayout = CLASS_FOLDER_LAYOUT,
    ) -> None:
        self.root = root
        self._extensions = frozenset(extensions)
        self._split = SplitAssigner(fractions)
        self._split_folders = dict(layout.split_folders)

    def file(self, path: str) -> Outcome:
        """A file below `root`: an image in a class folder is a Source labelled by that folder,
        its split a hash of its path, or in split folders the split folder's; a hidden file, or one
        below a hidden folder, and a non-image file are skipped; an image that is not in a class
        folder cannot be labelled; an image whose path is not valid UTF-8 (possible on local disk)
        is a dead letter naming it with the bytes escaped, since neither its label, its split hash
        nor `image/filename` can be text."""
        key = relative_key(self.root, path)
        shown = printable_path(path)
        if is_hidden(key):
            return Skipped(shown, HIDDEN)
        extension = extension_of(shown)
        if extension not in self._extensions:
            return Skipped(shown, extension or "(none)")
        if shown != path:
            return DeadLetter(shown, "list", "file name is not valid UTF-8")
        label_end = key.find("/")
        if label_end < 0:
            where = "<split>/<label>/" if self._split_folders else "<label>/"
            reason = f"image is directly in the input folder, not in a class sub-folder {where}"
            return DeadLetter(path, "label", reason)
        if not self._split_folders:
            return Source(path, key, key[:label_end], self._split(key))
        folder = key[:label_end]
        split = self._split_folders.get(folder)
        if split is None:  # a folder made after planning decided the layout
            reason = f"image is in {folder}/, which is not one of the split folders {', '.join(self._split_folders)}"
            return DeadLetter(path, "label", reason)
        label_start = label_end + 1
        label_end = key.find("/", label_start)
        if label_end < 0:
            reason = f"image is directly in split folder {folder}/, not in a class sub-folder {folder}/<label>/"
            return DeadLetter(path, "label", reason)
        return Source(path, key, key[label_start:label_end], split)

    def listed(self, entry: FileMetadata | storage.Unlisted) -> Outcome:
        """What the listing found: a file (`file`), or something below `root` it could not list
        (an unreadable folder, a link it does not follow), which is a dead letter naming it
        unless it is hidden (skipped, as everything below a hidden folder is)."""
        if isinstance(entry, storage.Unlisted):
            if is_hidden(relative_key(self.root, entry.path)):
                return Skipped(printable_path(entry.path), HIDDEN)
            return DeadLetter(printable_path(entry.path), "list", entry.reason)
        return self.file(entry.path)


def resolve_uri(base_dir: str, uri: str) -> str:
    """URIs in a CSV are absolute (gs://..., /...) or relative to the CSV's folder. Paths are
    normalised (`./`, `a//b`, `a/../b`), so that one image written two ways is one source, its
    rows duplicates or a conflict, never two records; a gs:// URI is taken as written, since
    `a//b` and `a/b` name two objects there (and `..` is part of an object's name). A relative
    URI's leading `..`s climb from the CSV's folder, in gs:// too (confinement_problem)."""
    if "://" in uri:
        return uri
    if uri.startswith("/"):
        return "/" + posixpath.normpath(uri).lstrip("/")
    if "://" not in base_dir:
        return posixpath.normpath(join(base_dir, uri))
    parts = [part for part in posixpath.normpath(uri).split("/") if part != "."]  # "." alone: the folder
    up = next((i for i, part in enumerate(parts) if part != ".."), len(parts))
    folders = base_dir.rstrip("/").split("/")  # gs:, "", bucket, folder, ...
    return "/".join(folders[: max(3, len(folders) - up)] + parts[up:])


@dataclasses.dataclass(frozen=True)
class Roots:
    """Where the rows of an image CSV may name images besides the CSV's own folder (config
    `image_csv.roots`: absolute local folders and gs:// prefixes), and whether they may name
    local files at all: not on a runner whose workers have disks of their own (Dataflow), where
    a local path names a file of the worker's, not the user's."""

    folders: tuple[str, ...] = ()
    local_files: bool = True


def confinement_problem(csv_folder: str, uri: str, image: str, roots: Roots) -> str | None:
    """Why a row of a CSV in `csv_folder` may not name `uri` (resolved: `image`), or None.

    Whoever writes the CSV chooses what the job reads and what its records and reports then tell,
    so an image must be below the CSV's folder or a folder of `roots`. Local paths are confined by
    their real path: a link below the folder to /etc/passwd is outside it. A gs:// URI written as
    such may name any object while `roots` names no gs:// prefix (the job's service account's
    permissions bound those), else only one below the CSV's folder or such a prefix: object names
    are literal, so a prefix holds every name that starts with it. Each refusal names the folder
    that would let the row in, and the flag that adds it (--image_roots, image_csv.roots)."""
    remote = storage.is_remote(image)
    folders = [f for f in (csv_folder, *roots.folders) if storage.is_remote(f) == remote]

    def add(folder: str) -> str:
        return f"to read it, add {folder}: --image_roots {','.join((*roots.folders, folder))} (image_csv.roots)"

    if remote:
        if any(_below(image, f) for f in folders):
            return None
        if storage.is_remote(uri) and not any(storage.is_remote(f) for f in roots.folders):
            return None
    elif not roots.local_files:
        return f"{uri} is a local path, and this runner's workers would read their own disk, not yours (use gs://)"
    elif any(_below(_real_path(image), _real_folder(f)) for f in folders):
        return None
    elif any(_below(image, f) for f in folders):
        real = posixpath.dirname(_real_path(image))
        return (
            f"{uri} leads out of the CSV's folder and image_csv.roots through a symbolic link, to {real}; {add(real)}"
        )
    folder = posixpath.dirname(image)
    if not storage.is_remote(uri) and not uri.startswith("/") and posixpath.normpath(uri).split("/")[0] == "..":
        return f"{uri} climbs out of the CSV's folder (..), and no folder of image_csv.roots holds it; {add(folder)}"
    return f"{uri} is neither below the CSV's folder nor below a folder of image_csv.roots; {add(folder)}"


def _below(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _real_path(path: str) -> str:
    """os.path.realpath(path), working out each folder's once: the rows of a CSV share a few."""
    folder, name = posixpath.split(path)
    return os.path.realpath(path) if os.path.islink(path) else posixpath.join(_real_folder(folder), name)


@functools.lru_cache(maxsize=4096)
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


class CsvRow(NamedTuple):
    """A row of an image CSV that parsed: where it is (`csv:line`), its line, its Source."""

    where: str
    line: int
    source: Source


def uri_scheme_problem(uri: str) -> str | None:
    """Why an image URI cannot be read here, or None: the job reads local paths and gs:// only
    (not http://, https://, file://: write the path; nor s3:// and the like, which roots cannot
    confine)."""
    if "://" not in uri or (uri.startswith("gs://") and storage.has_filesystem(uri)):
        return None
    return f"unsupported URI scheme {quoted(uri.split('://', 1)[0] + '://')} in {uri} (use gs:// or a local path)"


class CsvLayout(NamedTuple):
    """Where an image CSV's columns are: found by name in its header, or the AutoML layout of its
    first row; what its rows are said to have (`described`)."""

    split_at: int | None
    uri_at: int
    label_at: int
    width: int
    described: str
    header: bool


class ImageCsvLayoutError(ValueError):
    """An image CSV whose header does not name the columns the run reads: one line, naming the
    settings that name them."""


def csv_layout(row: list[str], csv_uri: str, uri_column: str, label_column: str, split_column: str) -> CsvLayout:
    """The layout the first row of an image CSV with data shows: a header naming `uri_column`
    (label required, split optional), or no header, `[split,]image_uri,label`. A first row of
    names only (no cell that could be a path: no `/`, no `.`; and not a split value first) is a
    header too, and one that names neither column is refused (ImageCsvLayoutError), rather than
    read as a row naming the image `filename`."""
    header = [cell.strip() for cell in row]
    if uri_column in header:
        if label_column not in header:
            raise ImageCsvLayoutError(
                f"{csv_uri}: its header {quoted(header)} names {quoted(uri_column)} but no {quoted(label_column)} "
                "column: set image_csv.label_column (in a --config file) to the column that holds the labels"
            )
        split_at = header.index(split_column) if split_column in header else None
        return CsvLayout(
            split_at,
            header.index(uri_column),
            header.index(label_column),
            len(header),
            f"the {len(header)} of the header",
            True,
        )
    names = without_padding(header)
    automl_row = len(names) >= 3 and names[0].lower() in {*SPLIT_NAMES, *_UNASSIGNED}
    if not automl_row and all(cell and not any(sign in cell for sign in "/.") for cell in names):
        raise ImageCsvLayoutError(
            f"{csv_uri}: its first row {quoted(header)} is a header that names no {quoted(uri_column)} column: set "
            "image_csv.uri_column and image_csv.label_column (in a --config file) to the columns that hold the image "
            "paths and the labels"
        )
    if len(without_padding(row)) >= 3:
        return CsvLayout(0, 1, 2, 3, "split,image_uri,label, as in the first row (no header)", False)
    return CsvLayout(None, 0, 1, 2, "image_uri,label, as in the first row (no header)", False)


def first_layout_row(records: Iterable[tuple[int, list[str] | Exception]]) -> list[str] | None:
    """The row an image CSV's layout is read from: its first that parses and is not blank."""
    for _, row in records:
        if not isinstance(row, Exception) and any(cell.strip() for cell in row):
            return row
    return None


def image_csv_rows(
    records: Iterable[tuple[int, list[str] | Exception]],
    csv_uri: str,
    uri_column: str,
    label_column: str,
    split_column: str,
    fractions: Sequence[tuple[str, float]],
    roots: Roots = Roots(),
    layout_row: list[str] | None = None,
) -> Iterator[CsvRow | DeadLetter]:
    """Each non-blank row of a CSV of image URIs as a CsvRow, or a DeadLetter saying why not.

    With a header naming `uri_column`, columns are found by name (label required, split optional).
    Without one, the AutoML layout of the first row is assumed: `[split,]image_uri,label`. A split
    value must be TRAIN/VALIDATION/TEST (or their short forms), UNASSIGNED/empty (hashed), or a
    configured split. A row with more fields than that (empty ones at its end aside) is a dead
    letter: a multi-label or bounding-box row would lose all but its first label. So is a row
    whose image is outside the CSV's folder and `roots` (confinement_problem), and a row the csv
    module cannot parse or past the limits of a row (transforms.csv_records). `records`: the CSV's
    (csv_records.CsvRecords); for a part that does not start the CSV, `layout_row` is the CSV's
    (first_layout_row), and every row of the part is data.
    """
    base_dir = storage.parent(csv_uri)
    known_splits = set(SPLIT_NAMES) | {name for name, _ in fractions}
    split_of = SplitAssigner(fractions)
    layout = None if layout_row is None else csv_layout(layout_row, csv_uri, uri_column, label_column, split_column)
    for line, row in records:
        where = f"{csv_uri}:{line}"
        if isinstance(row, Exception):
            yield DeadLetter(where, "parse", unreadable_row(row))
            continue
        if not row or not any(cell.strip() for cell in row):
            continue
        if layout is None:
            layout = csv_layout(row, csv_uri, uri_column, label_column, split_column)
            if layout.header:
                continue
        split_at, uri_at, label_at = layout.split_at, layout.uri_at, layout.label_at
        binary = not_text(row)
        if binary:
            yield DeadLetter(where, "parse", binary)
            continue
        fields = len(without_padding(row))
        if fields > layout.width or len(row) <= max(p for p in (split_at, uri_at, label_at) if p is not None):
            more = " (a multi-label or bounding-box row? each image gets one label)" if fields > layout.width else ""
            yield DeadLetter(where, "parse", f"{fields} field(s) where rows have {layout.described}{more}")
            continue
        uri, label = row[uri_at].strip(), row[label_at].strip()
        if not uri or not label:
            yield DeadLetter(where, "parse", "empty image URI" if not uri else f"no label for {uri}")
            continue
        image = resolve_uri(base_dir, uri)
        problem = uri_scheme_problem(uri) or confinement_problem(base_dir, uri, image, roots)
        if problem:
            yield DeadLetter(where, "parse", problem)
            continue
        split_value = row[split_at].strip().lower() if split_at is not None else ""
        if split_value in _UNASSIGNED:
            split = split_of(uri)
        elif split_value in known_splits:
            split = check_split_name(SPLIT_NAMES.get(split_value, split_value))
        else:
            yield DeadLetter(
                where,
                "parse",
                f"unknown split {quoted(row[split_at].strip())}: expected TRAIN, VALIDATION, TEST, UNASSIGNED or "
                f"empty, or a configured split ({', '.join(name for name, _ in fractions)})",
            )
            continue
        yield CsvRow(where, line, Source(image, uri, label, split))


def without_padding(row: list[str]) -> list[str]:
    """A CSV row without the empty fields at its end: no data (spreadsheet exports pad rows with them)."""
    end = len(row)
    while end and not row[end - 1].strip():
        end -= 1
    return row[:end]


def not_text(cells: Iterable[str]) -> str | None:
    """Why CSV cells read with errors="surrogateescape" (storage.open_text) are not text: they held
    bytes that are not UTF-8, or a NUL, which no text holds (binary data matched as CSV); None for
    text. Their row is a dead letter, not the end of the run, and none of it is quoted
    (core.shown.quoted quotes only text)."""
    cells = list(cells)
    if not all(is_text(cell) for cell in cells):
        return "invalid UTF-8"
    if any("\x00" in cell for cell in cells):
        return "a NUL byte, which text does not hold: binary data"
    return None


def resolve_duplicates(rows: Iterable[CsvRow]) -> list[tuple[int, Outcome]]:
    """The rows listing one image URI -> (line, outcome) for each.

    Identical rows (same label, same split): the first becomes the Source, every later one a
    `duplicate` dead letter naming the first's line. Rows that disagree on label or split: a
    conflict, so none is converted and each is a `conflict` dead letter naming the other lines
    (the first CONFLICTS_NAMED, and how many more).

    Work in proportion to the rows (a CSV may list one image thousands of times): the rows are
    grouped by what they say once, and each group's others found in one pass that stops after
    CONFLICTS_NAMED of them, skipping only the group's own rows."""
    rows = sorted(rows, key=lambda r: r.line)
    said = [(r.source.label, r.source.split) for r in rows]
    groups: dict[tuple[str, str], list[CsvRow]] = {}
    for r, what in zip(rows, said, strict=True):
        groups.setdefault(what, []).append(r)
    if len(groups) == 1:
        first = rows[0]
        return [(first.line, first.source)] + [
            (r.line, DeadLetter(r.where, "duplicate", f"duplicate row of line {first.line} ({r.source.key})"))
            for r in rows[1:]
        ]
    outcomes = []
    for (label, split), own in groups.items():
        others = ((r.line, what) for r, what in zip(rows, said, strict=True) if what != (label, split))
        named = list(itertools.islice(others, CONFLICTS_NAMED))
        listed = "; ".join(f"line {line} (label {quoted(what[0])}, split {quoted(what[1])})" for line, what in named)
        more = len(rows) - len(own) - len(named)
        listed += f" and {more} more" if more else ""
        for r in own:
            reason = (
                f"conflict: {r.source.key} has label {quoted(label)}, split {quoted(split)} here but {listed}; none "
                "of its rows is converted"
            )
            outcomes.append((r.line, DeadLetter(r.where, "conflict", reason)))
    return sorted(outcomes, key=lambda outcome: outcome[0])


def bucket_missing(uri: str) -> str | None:
    """'bucket gs://x does not exist' when GCS says so for `uri`'s bucket, else None (other
    schemes, or a bucket the account may not look up)."""
    if not uri.startswith("gs://"):
        return None
    bucket = uri[len("gs://") :].split("/", 1)[0]
    try:
        found = storage.bucket_exists(bucket)
    except Exception:  # unreachable: the read says what is wrong
        return None
    return None if found else f"bucket gs://{bucket} does not exist"


def list_image_folder(folder: str) -> tuple[dict[str, FileMetadata] | None, str | None]:
    """The files directly in a folder an image CSV points into, by path (None when it cannot be
    listed), and why every image in it is missing (its bucket does not exist), if so."""
    try:
        return {m.path: m for m in storage.list_folder(folder)}, None
    except Exception:
        return None, bucket_missing(folder)


def _exists(uri: str) -> bool:
    try:
        return storage.exists(uri)
    except Exception:  # cannot tell: the read says what is wrong
        return True


def check_images_exist(folder: str, sources: Iterable[Source], listing=None) -> Iterator[Source | DeadLetter]:
    """The sources of one folder as they are when they exist, else a `read` dead letter each
    (bucket does not exist; object not found): one listing per folder, and one lookup per image
    the listing lacks (a listing may leave out names a glob hides). When the folder cannot be
    listed for another reason, every source passes: its read says what is wrong. `listing`: the
    folder's `list_image_folder`, when the caller has it."""
    listed, missing = list_image_folder(folder) if listing is None else listing
    for source in sources:
        if missing:
            yield DeadLetter(source.uri, "read", missing)
        elif listed is None or source.uri in listed or _exists(source.uri):
            yield source
        else:
            what = "object" if storage.is_remote(source.uri) else "file"
            yield DeadLetter(source.uri, "read", f"{what} not found: {source.uri}")


SOURCES_PER_LIST = 64  # a listing's Sources travel in lists of up to this many


def in_lists(outputs: Iterable) -> Iterator:
    """A listing step's outputs with its Sources gathered into lists of up to SOURCES_PER_LIST
    (tagged outputs pass as they come): a runner's work per element (the lean local runner's
    bundle bookkeeping, a shuffle's per-record costs) is then paid per list."""
    sources = []
    for output in outputs:
        if isinstance(output, beam.pvalue.TaggedOutput):
            yield output
            continue
        sources.append(output)
        if len(sources) == SOURCES_PER_LIST:
            yield sources
            sources = []
    if sources:
        yield sources


class _Route(beam.DoFn):
    """Sends each outcome to its output: Sources main, Skipped and DeadLetters tagged."""

    def __init__(self):
        self._listed, self._skipped, self._errors = counter("listed"), counter("skipped"), counter("errors")

    def route(self, outcome: Outcome):
        self._listed.inc()
        if isinstance(outcome, Source):
            yield outcome
        elif isinstance(outcome, Skipped):
            self._skipped.inc()
            yield beam.pvalue.TaggedOutput(SKIPPED, outcome)
        else:
            self._errors.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)


FOLDERS = "folders"  # the local folders directly below a class-folder input, each listed on its own
RANGES = "ranges"  # name ranges of a gs:// input's listing, each listed on its own
JOB_LISTING = "listing in the job"  # the progress phase of a listing the job makes (transforms.progress)


class _ClassifyListed(_Route):
    """Routes what a listing of class folders finds, classified by `classify`, with its Sources in
    lists; each entry counts into `listing` (the steps of one listing share it)."""

    def __init__(self, classify: ClassFolders, listing: progress.Phase | None = None):
        super().__init__()
        self._classify = classify
        self._listing = listing or progress.Phase(JOB_LISTING, "files")

    def routed(self, entries):
        listed = self._classify.listed
        entries = progress.counted(entries, self._listing)
        yield from in_lists(o for entry in entries for o in self.route(listed(entry)))


class _ListInput(_ClassifyListed):
    """The impulse -> where the listing of the input fans out: locally, the entries directly in
    the input folder, routed, and each folder below it (tagged FOLDERS, to be listed by
    `_ListLocalFolder` wherever the runner sends it); on gs://, the first page of the whole
    prefix's listing, routed, and the rest of it as up to `threads` name ranges (tagged RANGES, to
    be listed by `_ListRange`), as many list requests as pages however many folders it holds.
    Or the planner's classified listing, where it was kept for this step (listing_handover: not
    counted as listing, which it is not)."""

    def __init__(self, classify: ClassFolders, listed_here, listing: progress.Phase | None = None, threads=16):
        super().__init__(classify, listing)
        self._listed_here, self._threads = listed_here, threads

    def process(self, _):
        outcomes = listing_handover.take(self._listed_here)
        if outcomes is not None:
            yield from in_lists(o for outcome in outcomes for o in self.route(outcome))
            return
        root = self._classify.root
        if storage.is_remote(root):
            first, rest = storage.start_listing(root, self._threads)
            yield from self.routed(first)
            for piece in rest:
                yield beam.pvalue.TaggedOutput(RANGES, piece)
            return
        direct, folders = storage.split_listing(root)
        yield from self.routed(direct)
        for folder in folders:
            yield beam.pvalue.TaggedOutput(FOLDERS, folder)


class _ListLocalFolder(_ClassifyListed):
    """A local folder below the input -> every entry below it, routed as the listing streams."""

    def process(self, folder):
        yield from self.routed(storage.list_tree(folder))


class _ListRange(_ClassifyListed):
    """A name range of a gs:// input's listing -> every object in it, routed as the listing
    streams, `threads` list requests in flight (the range split further as the threads allow)."""

    def __init__(self, classify: ClassFolders, listing: progress.Phase | None = None, threads: int = 16):
        super().__init__(classify, listing)
        self._threads = threads

    def process(self, name_range):
        yield from self.routed(storage.list_range(name_range, self._threads))


class CsvChanged(RuntimeError):
    """The CSV of image URIs is not the size it was planned at: its parts no longer start at rows."""


class _ParseImageCsvRows(_Route):
    """A part of the CSV of image URIs (CsvPart) -> its CsvRows (main) and dead letters (counted as
    listed: each row is counted once, here or where its CsvRow's fate is decided). The parts were
    cut where the planner found rows to start, in a CSV of `planned_size` bytes; a part of a CSV
    that has changed size since raises CsvChanged, failing the run rather than reading rows from
    the middle of others. Each row counts into the listing's progress, of `rows` if planned."""

    def __init__(
        self, csv_uri, uri_column, label_column, split_column, fractions, roots, planned_size, rows: int | None = None
    ):
        super().__init__()
        self._csv_uri, self._planned_size = csv_uri, planned_size
        self._args = (uri_column, label_column, split_column, tuple(fractions), roots)
        self._listing = progress.Phase(JOB_LISTING, "rows", rows)

    def process(self, part: CsvPart):
        csv_uri, layout_row = self._csv_uri, None
        if part.start:
            self._check_size()
            with storage.open_text(csv_uri, errors="surrogateescape", inside=None) as text:
                layout_row = first_layout_row(CsvRecords(text))
        with storage.open_text(csv_uri, errors="surrogateescape", start=part.start, inside=None) as text:
            records = CsvRecords(text, start=part.start, line=part.line, end=part.end)
            rows = image_csv_rows(records, csv_uri, *self._args, layout_row=layout_row)
            for row in progress.counted(rows, self._listing):
                if isinstance(row, CsvRow):
                    yield row
                else:
                    yield from self.route(row)

    def _check_size(self) -> None:
        found = storage.stat(self._csv_uri)
        size = None if found is None else found.size_in_bytes
        if size != self._planned_size:
            raise CsvChanged(
                f"{self._csv_uri} changed during the run (planned at {self._planned_size:,} bytes, now "
                f"{'gone' if size is None else f'{size:,} bytes'}): its parts no longer start at rows; run again"
            )


class _ResolveDuplicates(_Route):
    """(image URI, its CsvRows) -> one Source at most, dead letters for duplicates and conflicts."""

    def process(self, uri_rows):
        _, rows = uri_rows
        for _, outcome in resolve_duplicates(rows):
            yield from self.route(outcome)


class _CheckImagesExist(beam.DoFn):
    """(folder, its Sources) -> the Sources that exist, in a planned split (in lists: in_lists);
    the others are `read` or `parse` dead letters (they were counted as listed already).
    `splits`: the planned ones."""

    def __init__(self, splits):
        self._splits = frozenset(splits)
        self._errors = counter("errors")

    def process(self, folder_sources):
        yield from in_lists(self._checked(*folder_sources))

    def _checked(self, folder, sources):
        for outcome in check_images_exist(folder, sources):
            if isinstance(outcome, Source) and outcome.split not in self._splits:
                outcome = DeadLetter(
                    outcome.uri,
                    "parse",
                    f"split {quoted(outcome.split)} is not one of the planned splits "
                    f"{sorted(self._splits)} (was the CSV edited during the run?)",
                )
            if isinstance(outcome, Source):
                yield outcome
            else:
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)


class ListingOutputs(NamedTuple):
    """What a listing step gives."""

    sources: beam.PCollection  # lists of Sources (in_lists)
    skipped: beam.PCollection
    dead_letters: beam.PCollection


def _each(_, items: list):
    return items


def _uri_of(row: CsvRow):
    return row.source.uri, row


def _folder_of(source: Source):
    return storage.parent(source.uri), source


@beam.ptransform_fn
def ListClassFolders(
    start,
    root: str,
    extensions: Iterable[str],
    fractions,
    listed_here: str | None = None,
    entries: int | None = None,
    threads: int = 16,
    layout: FolderLayout = CLASS_FOLDER_LAYOUT,
):
    """Every file below `root`, listed inside the job (so the graph does not grow with it), once
    `start` (the job's start element: pipeline.job_lease.started) is given: the
    Sources in lists (in_lists), and a dead letter for each thing below it that cannot be listed
    (storage.list_below). The listing fans out, so no worker holds the whole listing: locally each
    folder directly below `root` is an element, spread over the workers; on gs:// the listing of
    the whole prefix is cut into name ranges, each an element, spread over the workers and listed
    `threads` list requests at a time, split again as they go (core.range_listing).
    `listed_here`: the key of the planner's classified listing, taken instead where the step runs
    in the planner's process (listing_handover). `entries`: what the planner listed, the
    listing's progress total. `layout`: class folders or split folders (transforms.folder_layout)."""
    outputs = (SKIPPED, DEAD_LETTERS)
    listing = progress.Phase(JOB_LISTING, "files", entries)
    classify = ClassFolders(root, extensions, fractions, layout)
    top = start | "ListInput" >> beam.ParDo(_ListInput(classify, listed_here, listing, threads)).with_outputs(
        *outputs, FOLDERS, RANGES, main="sources"
    )
    below = (
        top[FOLDERS]
        | "SpreadFolders" >> beam.Reshuffle()
        | "ListFolders" >> beam.ParDo(_ListLocalFolder(classify, listing)).with_outputs(*outputs, main="sources")
    )
    ranged = (
        top[RANGES]
        | "SpreadRanges" >> beam.Reshuffle()
        | "ListRanges" >> beam.ParDo(_ListRange(classify, listing, threads)).with_outputs(*outputs, main="sources")
    )
    steps = (top, below, ranged)
    return ListingOutputs(
        tuple(step.sources for step in steps) | "AllSources" >> beam.Flatten(),
        tuple(step.skipped for step in steps) | "AllSkipped" >> beam.Flatten(),
        tuple(step.dead_letters for step in steps) | "AllDeadLetters" >> beam.Flatten(),
    )


@beam.ptransform_fn
def ReadImageCsv(
    start,
    csv_uri: str,
    uri_column: str,
    label_column: str,
    split_column: str,
    fractions,
    splits,
    roots: Roots,
    parts: Sequence[CsvPart],
    planned_size: int,
    planned_rows: int | None = None,
):
    """Rows of the CSV as Sources, in lists (in_lists), once `start` (the job's start element) is
    given; `splits` are the ones planned (each gets its
    own writer); `roots`: where rows may name images (confinement_problem). The CSV is read in
    `parts` (cut by the planner where rows start, in a CSV of `planned_size` bytes and
    `planned_rows` rows: the listing's progress total), spread over the workers. Rows are grouped
    by image URI (duplicates, conflicts), then Sources by folder (one listing each, to find images
    that do not exist)."""
    parse = _ParseImageCsvRows(
        csv_uri, uri_column, label_column, split_column, fractions, roots, planned_size, planned_rows
    )
    rows = (
        start
        | "Parts" >> beam.FlatMap(_each, list(parts))
        | "SpreadParts" >> beam.Reshuffle()
        | "ParseRows" >> beam.ParDo(parse).with_outputs(SKIPPED, DEAD_LETTERS, main="rows")
    )
    resolved = (
        rows.rows
        | "ByImageUri" >> beam.Map(_uri_of)
        | "GroupByImageUri" >> beam.GroupByKey()
        | "ResolveDuplicates" >> beam.ParDo(_ResolveDuplicates()).with_outputs(SKIPPED, DEAD_LETTERS, main="sources")
    )
    checked = (
        resolved.sources
        | "ByFolder" >> beam.Map(_folder_of)
        | "GroupByFolder" >> beam.GroupByKey()
        | "CheckImagesExist" >> beam.ParDo(_CheckImagesExist(splits)).with_outputs(DEAD_LETTERS, main="sources")
    )
    skipped = (rows.skipped, resolved.skipped) | "AllSkipped" >> beam.Flatten()
    dead_letters = (
        rows.dead_letters,
        resolved.dead_letters,
        checked.dead_letters,
    ) | "AllRowDeadLetters" >> beam.Flatten()
    return ListingOutputs(checked.sources, skipped, dead_letters)
