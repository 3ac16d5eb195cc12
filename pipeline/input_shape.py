"""What an input is, decided in one place (`input_shape`): a folder of class folders, a folder of
split folders, a folder of CSV files, a CSV of image URIs, a tabular CSV, a file pattern, a
converted dataset, something no kind reads (an image file, an archive, a FIFO), or nothing at
all; and which `--kind` reads it, as given or given another way. pipeline.preflight refuses an
input its kind does not read with `mismatch`: one line saying what the input is and which kind
(or which --input) reads it, before any work. Without it the mistake surfaced as whatever the
wrong kind's reader tripped on first ("is a file, expected a folder", "does not exist" for a
pattern that matches files, "the output is inside the input"), or as a run of dead letters.

Looking is cheap and bounded: a folder's first FOLDER_ENTRIES entries (and those of its first
split folder), a file's first SNIFF_BYTES through core.storage (a local file only when regular,
a gs:// object in one ranged request), and a pattern's first match (its walk, at worst, is the one
--kind csv's planning makes anyway); a gs:// prefix is taken for a folder of class folders, unlisted.
What a file holds is said by names and counts, and by the header cells of a file read as CSV
text, shown escaped (transforms.tabular.shown), never by its bytes.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import itertools
import os
import shlex
import zlib

from core import storage
from core.contract.folders import NEITHER, folder_kind
from core.contract.versions import LatestPointerError
from core.file_signatures import binary_kind
from core.local_files import LeadsOutside, NotARegularFile, dangling, not_regular
from core.shown import quoted
from pipeline.config import Config
from pipeline.flags import command_name
from transforms.csv_dialect import DialectError, choose_delimiter
from transforms.csv_records import CsvRecords
from transforms.sources import ImageCsvLayoutError, csv_layout, extension_of
from transforms.splits import SPLIT_NAMES
from transforms.tabular import hidden_match, image_columns

FOLDER_ENTRIES = 1000  # a folder's entries looked at, at most
SNIFF_BYTES = 64 << 10  # of a file, read to tell an image CSV from a table
SNIFF_ROWS = 20  # rows of those bytes looked at
CLOSE_NAMES = 10_000  # names of a missing input's folder compared with its name, at most
ARCHIVE_EXTENSIONS = (".zip", ".tar", ".tgz", ".7z", ".rar", ".bz2", ".xz")
# What each kind reads, as a refusal names it.
READS = {
    "images": "a folder of class folders",
    "image_csv": "one CSV file of image URIs",
    "csv": "tabular CSV files, one or a file pattern of them",
}


@dataclasses.dataclass(frozen=True)
class Shape:
    """What an input is (`what`, to follow "input X is") and the kinds that read it (none: `advice`
    says what would); `given_as`, the --input those kinds read it as when not the one given (a
    folder of CSV files: a pattern of them), quoted for a shell where the refusal names it."""

    what: str
    kinds: tuple[str, ...] = ()
    given_as: str = ""
    advice: str = ""


def input_shape(uri: str, config: Config) -> Shape:
    """What the input `uri` (absolute, or gs://) is, and which kinds read it (see the module)."""
    if storage.is_remote(uri):
        return _remote_shape(uri, config)
    if not os.path.lexists(uri) and storage.has_wildcard(uri):
        return _pattern_shape(uri, config)
    reason = dangling(uri)
    if reason:
        return Shape(reason, advice="give the path it was meant to name")
    if not os.path.exists(uri):
        return Shape("", advice=_missing(uri))
    mode = os.stat(uri).st_mode
    if os.path.isdir(uri):
        return _folder_shape(uri, config)
    reason = not_regular(uri, mode)
    if reason:  # a FIFO's read would wait for a writer, a link to /dev/zero's never end
        return Shape(reason, advice="give the folder, CSV file or file pattern to convert")
    return _file_shape(uri, config)


def mismatch(uri: str, shape: Shape, kind: str, kind_given: bool) -> str | None:
    """The line refusing `uri` as input of `kind` (`kind_given`: by a flag or the config, not by
    default), or None when that kind reads it as given."""
    if not shape.what:
        return f"input {uri} does not exist{shape.advice}"
    if kind in shape.kinds and not shape.given_as:
        return None
    if not shape.kinds:
        return f"input {uri} is {shape.what}, which no --kind reads: {shape.advice}"
    which = f"--kind {kind}{'' if kind_given else ', the default,'}"
    kinds = [] if kind in shape.kinds else [f"--kind {k}" for k in shape.kinds]
    give = " or ".join(kinds) + (f" --input {shlex.quote(shape.given_as)}" if shape.given_as else "")
    return f"input {uri} is {shape.what}; {which} reads {READS[kind]}: give {give.strip()}"


def _missing(path: str) -> str:
    """After "does not exist": the closest name in its folder, or the first of its folders that
    does not exist either; or that a `~` in it is no home folder (a shell puts it in its place
    only at the start of an unquoted word)."""
    if "~" in path.split("/"):
        return " (~ here names a folder called ~, not your home folder: give the full path)"
    folder, name = os.path.split(path.rstrip("/"))
    if not os.path.isdir(folder):
        while folder and not os.path.isdir(os.path.dirname(folder)):
            folder = os.path.dirname(folder)
        return f" (nor does the folder {folder})"
    try:
        with os.scandir(folder) as entries:
            names = [entry.name for entry in itertools.islice(entries, CLOSE_NAMES)]
    except OSError:
        return ""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f"; did you mean {os.path.join(folder, close[0])}?" if close else ""


def _folder_shape(folder: str, config: Config) -> Shape:
    folders, files = _entries(folder)
    try:
        found = folder_kind(folder, storage.text_reader(folder), lambda _: [*folders, *files])
    except (LatestPointerError, NotARegularFile, LeadsOutside):  # a LATEST naming no version, or planted: a root's
        found = None
    if found is None or found.kind != NEITHER:  # this pipeline's output (core.contract.folders)
        return Shape(
            found.what() if found else "a refresh root (it holds LATEST)",
            advice=f"it is this pipeline's output ({command_name('inspect')} {folder} shows it); "
            "give the data to convert",
        )
    if folders and all(name.lower() in SPLIT_NAMES for name in folders):  # planning reads them: folder_layout
        return Shape(f"a folder of split folders ({', '.join(f'{name}/' for name in folders)})", ("images",))
    if folders:
        return Shape("a folder of class folders", ("images",))
    csvs = [name for name in files if _named_csv(name)]
    if csvs:
        return _csv_folder_shape(folder, csvs, config)
    images = [name for name in files if extension_of(name) in config.image.extensions]
    if images:
        return Shape(
            f"a folder of {_count(images, 'image')} without class folders (such as {images[0]})",
            advice=f"--kind images labels each image by its folder below the input ({folder}/<label>/...): move them "
            "into class folders, or list them with their labels in an image CSV (--kind image_csv)",
        )
    return Shape("a folder of class folders", ("images",))  # empty, or other files: planning says what it holds


def _csv_folder_shape(folder: str, csvs: list[str], config: Config) -> Shape:
    first = os.path.join(folder, csvs[0])
    if _file_shape(first, config).kinds == ("image_csv",):
        return Shape(f"a folder of {_count(csvs, 'CSV file')} ({csvs[0]}: image URIs)", ("image_csv",), given_as=first)
    what = f"a folder of {_count(csvs, 'CSV file')} (such as {csvs[0]})"
    suffix = "*.csv*" if any(name.endswith(".gz") for name in csvs) else "*.csv"
    return Shape(what, ("csv",), given_as=os.path.join(folder, suffix))


def _entries(folder: str) -> tuple[list[str], list[str]]:
    """(the folders, the files) among the first FOLDER_ENTRIES entries of `folder`, hidden ones left
    out, sorted; a link to a folder is neither (listings do not follow it)."""
    folders, files = [], []
    try:
        with os.scandir(folder) as entries:
            for entry in itertools.islice(entries, FOLDER_ENTRIES):
                if entry.name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.name)
                elif not entry.is_symlink() or not os.path.isdir(entry.path):
                    files.append(entry.name)
    except OSError:  # an unreadable folder: planning names it
        pass
    return sorted(folders), sorted(files)


def _file_shape(path: str, config: Config) -> Shape:
    """A file: an image, an archive, a converted dataset's shard, or what its first rows say it is
    (a CSV of image URIs, a table); a CSV that cannot be read here is left to the run, which says
    why (either CSV kind reads it, as far as can be told)."""
    name = os.path.basename(path)
    extension = extension_of(name)
    if extension in config.image.extensions:
        holder = os.path.dirname(os.path.dirname(path))
        return Shape(
            f"an image file ({extension})",
            advice=f"--kind images reads the folder of class folders that holds it (--input {holder}?)",
        )
    if extension in ARCHIVE_EXTENSIONS:
        return Shape(f"an archive ({extension})", advice="unpack it, and give the folder or CSV file it holds")
    if ".tfrecord" in name or extension == ".array_record":
        return Shape("a shard of a converted dataset", advice="give the data to convert, not a converted dataset")
    head = _head(path)
    if head is None:
        return Shape("a CSV file", ("image_csv", "csv"))
    binary = binary_kind(head)  # a workbook, compressed data, UTF-16 (Excel's "Unicode Text"), ...
    if binary:
        return Shape(binary, advice="give a CSV file of UTF-8 text, or the folder or file pattern to convert")
    rows = _rows(head, config.csv.delimiter)
    if rows is None:
        return Shape("a CSV file", ("image_csv", "csv"))
    if not rows:
        return Shape("an empty file", ("image_csv", "csv"))
    return _csv_shape(rows, config)


def _csv_shape(rows: list[list[str]], config: Config) -> Shape:
    """A CSV of image URIs when its header names the URI column (image_csv.uri_column), or when at
    least half the rows looked at name an image file where the AutoML layout has its URI, as the
    image CSV reader finds it (transforms.sources.csv_layout); otherwise a table."""
    columns = config.image_csv
    header = [cell.strip() for cell in rows[0]]
    extensions = config.image.extensions
    if columns.uri_column in header:
        return Shape(f"a CSV file of image URIs (header {quoted(header)})", ("image_csv",))
    try:
        uri_at = csv_layout(rows[0], "", columns.uri_column, columns.label_column, columns.split_column).uri_at
    except ImageCsvLayoutError:  # a header of other names: image URIs if a column of them holds image files
        named = [header[i] for i in image_columns(rows[1:], extensions) if i < len(header)]
        if named:
            return Shape(
                f"a CSV file of image URIs (header {quoted(header)}, images in {quoted(named[0])})", ("image_csv",)
            )
        return Shape(f"a tabular CSV file ({len(header):,} columns: {quoted(header)})", ("csv",))
    naming = sum(1 for row in rows if uri_at < len(row) and extension_of(row[uri_at].strip()) in extensions)
    if 2 * naming >= len(rows):
        return Shape(
            f"a CSV file of image URIs (no header; {naming} of its first {len(rows)} rows name image files)",
            ("image_csv",),
        )
    columns_named = f"{len(header):,} column{'' if len(header) == 1 else 's'}"
    return Shape(f"a tabular CSV file ({columns_named}: {quoted(header)})", ("csv",))


def _head(path: str) -> bytes | None:
    """The file's first SNIFF_BYTES (unwrapped from GZIP by name, as core.storage.open_text does),
    or None when they cannot be read (a GZIP stream that does not inflate, a file gone): the run
    says why."""
    try:
        data = storage.read_start(path, SNIFF_BYTES, inside=None)
        return (
            zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(data, SNIFF_BYTES)
            if storage.is_gzip(path)
            else data
        )
    except (OSError, zlib.error):
        return None
    except Exception:  # gs://: the client's errors (NotFound, Forbidden, ...)
        if storage.is_remote(path):
            return None
        raise


def _rows(head: bytes, delimiter: str) -> list[list[str]] | None:
    """The first non-blank rows (up to SNIFF_ROWS) of a file that starts with `head`, split at
    `delimiter` (csv.delimiter; auto: as a tabular run chooses it, transforms.csv_dialect); None
    when they do not parse. Bytes that are not UTF-8 are read as replacement characters: a row of
    them is the run's to report, as a dead letter."""
    text = head.decode("utf-8", "replace")
    whole = len(head) < SNIFF_BYTES
    try:
        delimiter = choose_delimiter(text, delimiter, whole=whole)
    except DialectError:  # no clear choice: the run says why, if it is a tabular one
        delimiter = ","
    if not whole:
        text = text[: text.rfind("\n") + 1] or text  # the last line may be cut
    rows = []
    for _, row in CsvRecords(io.StringIO(text, newline=""), delimiter):
        if isinstance(row, Exception):
            return None
        if any(cell.strip() for cell in row):
            rows.append(row)
    return rows[:SNIFF_ROWS]


def _named_csv(name: str) -> bool:
    return name.lower().endswith((".csv", ".csv.gz", ".tsv"))


def _count(names: list[str], what: str) -> str:
    """`3 CSV files`, of the names found among a folder's first FOLDER_ENTRIES (`1,000+` when all)."""
    more = "+" if len(names) >= FOLDER_ENTRIES else ""
    return f"{len(names):,}{more} {what}{'' if len(names) == 1 else 's'}"


def _pattern_shape(pattern: str, config: Config) -> Shape:
    """A file pattern: a folder before its wildcards that does not exist is the input missing; only
    --kind csv reads patterns, and the first match it reads (hidden ones are not: hidden_match)
    says whether they are tables."""
    root = storage.pattern_root(pattern)
    if not os.path.isdir(root):
        state = "is not a folder" if os.path.exists(root) else "does not exist"
        return Shape("", advice=f" (its folder {root} {state})")
    what = "a file pattern (only --kind csv reads patterns)"
    matches = storage.list_matching(pattern)
    first = next(
        (m.path for m in matches if isinstance(m, storage.FileMetadata) and not hidden_match(pattern, m.path)), None
    )
    if first is None or not os.path.isfile(first):
        return Shape(what, ("csv",))  # planning names what it matched, or that it matched nothing
    matched = _file_shape(first, config)
    if "csv" in matched.kinds:
        return Shape(what, ("csv",))
    what = f"a file pattern whose first match, {first}, is {matched.what}"
    if matched.kinds == ("image_csv",):
        return Shape(what, ("image_csv",), given_as=first)
    return Shape(what, advice=matched.advice)


def _remote_shape(uri: str, config: Config) -> Shape:
    """A gs:// input: for --kind csv a pattern, for the other kinds a name (`gs://b/exp[1]` names
    that prefix: telling whether objects lie below it would take a listing); an object (a file,
    looked at as local files are), or else a prefix, taken for a folder of class folders (its
    listing is planning's)."""
    if config.kind == "csv" and storage.has_wildcard(uri):
        return Shape("a file pattern (only --kind csv reads patterns)", ("csv",))
    in_bucket = uri[len("gs://") :].partition("/")[2]
    if not in_bucket.strip("/") or storage.stat(uri) is None:  # a whole bucket, or no object of that name
        return Shape("a folder of class folders", ("images",))
    return _file_shape(uri, config)
