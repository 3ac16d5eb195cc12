"""Tabular CSV files (plain or .gz, one header each) to one Example per row.

Column types come from the configured schema or are inferred over all the data (a CombineFn, so
it scales): int64 if every value is an integer, float32 if every value is a number, string
otherwise; `bool` only when declared (true/false, stored as int64 1/0). Where an inferred dtype
holds values otherwise than as written (leading zeros, float32's rounding), the manifest's
warnings say so (column_warnings). A number is written as CSV tools write one: digits with an
optional sign, point and exponent, or nan/inf, never with Python's digit-grouping underscores
("2023_01" is text, not 202301); with `csv.decimal: ","` a comma takes the point's place (46,70),
and a value holding a point is text. An empty cell means the feature is absent from that record. A
UTF-8 BOM at the start of a file is not part of its header. The character between fields is the
one the planner chose (transforms.csv_dialect: the plan's `dialect`), for every file of the run.

Every read is bounded (ReadCsvRows, read_header: transforms.csv_records): a header holds up to HEADER_LIMIT
characters and MAX_COLUMNS columns, a row up to CSV_ROW_LIMIT characters and CSV_DELIMITER_LIMIT
delimiters, counted as its lines are read, before the csv module builds its fields. A longer row
is a `parse` dead letter naming its line and the limit, and the rest of its file is read.

A file that cannot be read to its end (a truncated or corrupt .gz, a file gone since the
listing) fails the run, naming the file: the rows it holds past the failure are unknown, so no
count of dead letters could weigh them against the error budget, and a run that loses an unknown
part of its input must not pass it. A malformed row is a dead letter, and so is each row of a file
with another header. A FIFO, socket or device matching the pattern (or a link to one) holds no
rows to lose, and reading it would wait for a writer or never end: it is not read, and is one
`read` dead letter, as a file whose header cannot be parsed is one `header` dead letter. So is a
file whose first line is not text (a workbook, compressed data, UTF-16, a NUL byte: NotCsvText),
named by what it begins as and its size, never quoted. A match
that cannot be listed (a dangling link: Beam's own matching drops it) is one `list` dead letter,
as in a class folder (`ListCsvFiles`). A wildcard does not match hidden names, as in a shell
(`data/**/*.csv` and `.ipynb_checkpoints/t-checkpoint.csv`, `data/*.csv` and macOS's `._t.csv`):
such a match is skipped as `(hidden)`, unless the pattern names hidden entries itself.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import difflib
import functools
import io
import re
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import apache_beam as beam

from core import storage
from core.file_signatures import what_it_is
from core.local_files import NotARegularFile
from core.shown import quoted
from transforms import progress, stopping
from transforms.counting import counter
from transforms.csv_dialect import AUTO, CsvDialect, DialectError, choose_dialect, head_rows, row_fields
from transforms.csv_numbers import GROUPED_THOUSANDS, OTHER_DECIMAL, is_float, is_int64, other_decimal, read_float
from transforms.csv_records import CSV_ROW_LIMIT, CsvRecords, QuoteLeftOpen, RecordTooLong, bounded_rows, unreadable_row
from transforms.example_proto import ExampleTooLarge, encode_example
from transforms.label_column import MAX_CLASSES, label_classes, label_warnings
from transforms.outcomes import DEAD_LETTERS, SKIPPED, DeadLetter, Record, Skipped
from transforms.sources import (
    HIDDEN,
    extension_of,
    is_hidden,
    not_text,
    printable_path,
    relative_key,
    without_padding,
)
from transforms.splits import SplitAssigner

DECLARABLE_TYPES = ("int64", "float32", "string", "bool")
_LEADING_ZERO = re.compile(r"[+-]?0\d")  # "007", "-01", "00.5": digits a number does not keep
FLOAT32_EXACT = 2**24  # float32 holds every integer up to this; past it, not even every integer
_BOOLS = {"true": 1, "false": 0, "1": 1, "0": 0}


GENERATED_NAME = "column_"  # + its number from 1: the names of the columns of files without a header
# Past this many values that are not numbers, a column is text: its values are no longer checked.
STRAY_TEXT_LIMIT = 100
# Columns a dataset may have. Wide tables (genomics, one-hot features) reach tens of thousands, and
# TensorFlow parses Examples of that many features; each costs the job a tally per worker and the
# manifest a feature spec (about 300 bytes together), and a header past this is more likely a line
# of data than names.
MAX_COLUMNS = 100_000
# Characters a header may hold: 40 per name for MAX_COLUMNS. Read line by line within it, so a
# first line of a GB without a line end is refused having read this much.
HEADER_LIMIT = 4 * 2**20
# What the planner reads of the first file to choose the delimiter: its first line and up to this
# many more, within HEAD_LIMIT characters.
HEAD_LINES = 100
HEAD_LIMIT = 2**20


class NotedValues(NamedTuple):
    """Values of a column that a user of the data should hear of (the few that made a column of
    numbers string; numbers written with leading zeros; numbers float32 moves by 1 or more): how
    many there are, how many numbers they stand among, and one of them (the least by source: the
    same whatever the order the runner gave the rows in)."""

    count: int
    numbers: int
    source: str  # file:line
    value: str


@dataclasses.dataclass(frozen=True)
class ColumnType:
    """What the data says of one column: its dtype, in how many rows it is empty, and what its
    warnings name (column_warnings): when a few values kept it from being a number, those; when
    every value that kept it from being a number is one with the other decimal sign (46,70 where
    csv.decimal is '.'), those; when it is stored as numbers, those written with leading zeros,
    which a number does not keep; when it is stored as float32, the numbers that float32 moves by
    1 or more (ids, timestamps)."""

    dtype: str  # one of DECLARABLE_TYPES
    missing: int
    stray_text: NotedValues | None = None
    leading_zeros: NotedValues | None = None
    float32_moved: NotedValues | None = None
    other_decimal: NotedValues | None = None
    # every one of those is shaped as thousands grouped with that sign are (1,234): perhaps they are
    grouped_thousands: bool = False
    decimal: str = "."  # csv.decimal, which the values the warnings show were read with
    # The label column's classes (transforms.label_column.label_classes; None: it has none to name),
    # and why it has none where a user may expect some.
    classes: tuple[str, ...] | None = None
    class_warnings: tuple[str, ...] = ()

    @property
    def stored_dtype(self) -> str:
        """The dtype of its feature: a bool is stored as int64, and so is a string label column
        with classes, as their ids."""
        if self.dtype == "bool" or (self.dtype == "string" and self.classes is not None):
            return "int64"
        return self.dtype

    @functools.cached_property
    def class_ids(self) -> dict[str, int]:
        """A string label column's class id of each of its values."""
        return {name: i for i, name in enumerate(self.classes or ())}


class Row(NamedTuple):
    source: str  # file:line, for dead letters
    split: str
    values: tuple[str, ...]


def float32_of(number: float) -> float:
    """What a float32 feature holds of `number` (protobuf rounds each float_list value so)."""
    return struct.unpack("f", struct.pack("f", number))[0]


def moved_by_float32(value: str, decimal: str = ".") -> bool:
    """Whether float32 holds the number `value` writes 1 or more away from it: only numbers of
    FLOAT32_EXACT or more can be, such as ids, timestamps and large amounts."""
    number = read_float(value, decimal)
    if not abs(number) >= FLOAT32_EXACT:  # nan too
        return False
    held = float32_of(number)
    return held != number and not abs(held - number) < 1  # past float32's range: held as inf


def stored_value(value: str, dtype: str, decimal: str = "."):
    """What a feature of `dtype` holds of a cell that fits it."""
    parsed = parse_value(value, dtype, decimal)
    return float32_of(parsed) if dtype == "float32" else parsed


def parse_value(value: str, dtype: str, decimal: str = "."):
    """The typed value of a non-empty cell (`decimal`: the sign before a number's fraction);
    ValueError names what is wrong."""
    if dtype == "string":
        return value.encode("utf-8")
    if dtype == "int64":
        if not is_int64(value):
            raise ValueError(f"{quoted(value)} is not an int64")
        return int(value)
    if dtype == "float32":
        return read_float(value, decimal)
    if dtype == "bool":
        if value.strip().lower() not in _BOOLS:
            raise ValueError(f"{quoted(value)} is not true/false")
        return _BOOLS[value.strip().lower()]
    raise ValueError(f"unknown dtype {quoted(dtype)}")


def read_header(
    uri: str, delimiter: str = AUTO, decimal: str = AUTO, header: str | bool = AUTO, names: Sequence[str] = ()
) -> tuple[tuple[str, ...], CsvDialect]:
    """The column names of a CSV file (a UTF-8 BOM before them is not part of them), and the
    dialect to read it with: `delimiter`, `decimal` and `header` (csv.delimiter, csv.decimal,
    csv.header) as given, `auto` as its first lines show (transforms.csv_dialect.choose_dialect,
    whose DialectError this raises). The names are its header's; for a file without one, `names`
    (csv.columns), or column_1 .. column_N. ValueError when the first line is longer than
    HEADER_LIMIT or the header is not UTF-8. A bad byte in a later row is that row's dead letter
    (ReadCsvRows), so the header is decoded alone, not with the rest. A first line the job cannot
    read as a row (a quote left open in it: csv_records) is ValueError too, unless `header` is
    False (then it is a row's dead letter): with a header, or maybe one, it names the columns."""
    head, whole = _read_head(uri)
    dialect = choose_dialect(head, delimiter, decimal, header, whole)
    rows = head_rows(head, dialect.delimiter, whole)
    if header is not False:  # a header, or may be: its first line decides the columns
        _, record = next(iter(CsvRecords(io.StringIO(head, newline=""), dialect.delimiter, HEADER_LIMIT)), (0, []))
        if isinstance(record, Exception):
            reason = str(record) if isinstance(record, QuoteLeftOpen) else unreadable_row(record)
            raise ValueError(
                f"its first line is no row: {reason} (fix its quotes, or set csv.header: false if that line is data)"
            )
    first = tuple(without_padding(rows[0] if rows else []))
    if not_text(first):
        raise NotCsvText(head)
    if dialect.header:
        if names:
            raise DialectError(
                "csv.columns names the columns of files without a header row, but its first row is a header "
                f"{quoted(first)}: leave csv.columns out to use it, or set csv.header: false if it is data"
            )
        return first, dialect
    width = max((len(without_padding(row)) for row in rows), default=0)
    if names and len(names) != width:
        raise DialectError(f"csv.columns names {len(names)} column(s), but its rows have {width} field(s)")
    return tuple(names) or tuple(f"{GENERATED_NAME}{number}" for number in range(1, width + 1)), dialect


class NotCsvText(ValueError):
    """A CSV file whose first line is not text (transforms.sources.not_text): named by what it
    begins as (core.file_signatures), never by its bytes, which may be anything (a workbook, a
    key, an archive) and would garble the terminal."""

    def __init__(self, head: str):
        super().__init__(
            f"it is not UTF-8 CSV text: it begins as {what_it_is(head[:64].encode(errors='surrogateescape'))}"
        )


def image_path_columns(uri: str, columns: Sequence[str], dialect: CsvDialect, extensions: Iterable[str]) -> list[str]:
    """The columns of a CSV file whose every value in its first rows names an image file
    (image_columns): an image CSV given as a table, whose records would hold the images' paths,
    not the images."""
    head, whole = _read_head(uri)
    rows = head_rows(head, dialect.delimiter, whole)[1 if dialect.header else 0 :]
    return [columns[index] for index in image_columns(rows, extensions) if index < len(columns)]


def image_columns(rows: Sequence[Sequence[str]], extensions: Iterable[str]) -> list[int]:
    """The indexes of the columns whose every non-empty value in `rows` names an image file (a
    path or URI ending in one of `extensions`)."""
    extensions = frozenset(extensions)
    width = max((len(row) for row in rows), default=0)
    found = []
    for index in range(width):
        values = [row[index].strip() for row in rows if index < len(row) and row[index].strip()]
        if values and all(extension_of(value) in extensions for value in values):
            found.append(index)
    return found


def _read_head(uri: str) -> tuple[str, bool]:
    """A CSV file's first line (at most HEADER_LIMIT characters, else ValueError) and up to
    HEAD_LINES more within HEAD_LIMIT characters, never reading a line past either; and whether
    that is the whole file (if not, its last record may be cut: a quoted field spanning lines)."""
    with storage.open_text(uri, errors="surrogateescape", inside=None) as text:
        first = text.readline(HEADER_LIMIT + 1)
        if len(first) > HEADER_LIMIT:
            raise ValueError(f"its first line is longer than {HEADER_LIMIT:,} characters, the most a header may hold")
        lines, left = [first.removeprefix("\ufeff")], HEAD_LIMIT
        for _ in range(HEAD_LINES):
            line = text.readline(left + 1)
            if not line:
                return "".join(lines), True
            left -= len(line)
            if left < 0:  # a line cut by the limit: left out
                break
            lines.append(line)
    return "".join(lines), False


def _whole_file_error(listed, errors, letter: DeadLetter) -> beam.pvalue.TaggedOutput:
    """A file that gives no rows at all, as one dead letter: one source listed, one error."""
    listed.inc()
    errors.inc()
    return beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)


def hidden_match(pattern: str, path: str) -> bool:
    """Whether only a wildcard of `pattern` matched a hidden name in `path` (a file or folder name
    starting with "."), which a shell's wildcards never match; False where the pattern names
    hidden entries itself (`data/.cache/*.csv`)."""
    root, rest = storage.split_pattern(pattern)
    return not is_hidden(rest) and is_hidden(relative_key(root, path))


class ListCsvFiles(beam.DoFn):
    """The impulse -> the metadata of every file the pattern matches; a match that cannot be listed
    (storage.list_matching: a dangling link, or a folder it cannot enter that could hold matches)
    is a `list` dead letter naming it, and a hidden match (hidden_match) is skipped, each counted
    as listed (each file is counted listed once: here, or by the rows ReadCsvRows finds in it)."""

    def __init__(self, pattern: str):
        self._pattern = pattern
        self._listed, self._skipped, self._errors = counter("listed"), counter("skipped"), counter("errors")

    def process(self, _):
        for entry in storage.list_matching(self._pattern):
            if hidden_match(self._pattern, entry.path):  # a file, or a folder it cannot enter
                self._listed.inc()
                self._skipped.inc()
                yield beam.pvalue.TaggedOutput(SKIPPED, Skipped(printable_path(entry.path), HIDDEN))
            elif isinstance(entry, storage.Unlisted):
                letter = DeadLetter(printable_path(entry.path), "list", entry.reason)
                yield _whole_file_error(self._listed, self._errors, letter)
            else:
                yield entry


class UnreadableCsvError(RuntimeError):
    """A CSV file of the input could not be read to its end: the run must fail."""


READ_COUNT_ROWS = 4096  # rows between two looks at how far a CSV file has been read (_FileRead)


class _FileRead:
    """How much of one CSV file has been read, counted into `phase` in bytes of the file as listed
    (`size`; compressed, for a .gz): where the file under its text stream stands, looked at every
    READ_COUNT_ROWS rows, and the rest of the file once it is done."""

    def __init__(self, phase: progress.Phase, size: int):
        self._phase, self._size, self._counted, self._file = phase, size, 0, None

    def watch(self, text: io.TextIOWrapper) -> None:
        self._file = getattr(text.buffer, "fileobj", text.buffer)  # a gzip.GzipFile reads its .fileobj

    def advance(self) -> None:
        try:
            self._count(min(self._file.tell(), self._size))
        except (AttributeError, OSError, ValueError):  # a stream that cannot tell: counted when done
            pass

    def done(self) -> None:
        self._count(self._size)

    def _count(self, position: int) -> None:
        if position > self._counted:
            self._phase.add(position - self._counted)
            self._counted = position


class ReadCsvRows(beam.DoFn):
    """A CSV file -> Rows, its fields split at `delimiter` (the plan's); a malformed row is a dead
    letter, and so is a row past the limits (csv_records.bounded_rows), every row of a file whose header
    differs (its rows weigh in the error budget as rows; a file with none is one), and a FIFO or
    device (one). Each file counts into the `reading CSV` phase (transforms.progress) as it is read,
    in bytes of the `total_bytes` listed. `header`: whether every file's first row is a header
    (the plan's dialect), else data like the rest."""

    def __init__(
        self,
        root: str,
        columns: Sequence[str],
        fractions,
        delimiter: str = ",",
        total_bytes: int | None = None,
        header: bool = True,
    ):
        self._root, self._columns, self._split = root, tuple(columns), SplitAssigner(fractions)
        self._delimiter, self._header = delimiter, header
        self._listed, self._errors = counter("listed"), counter("errors")
        self._reading = progress.Phase("reading CSV", progress.BYTES, total_bytes)

    def process(self, metadata):
        path = metadata.path
        key = relative_key(self._root, path) if path.startswith(self._root.rstrip("/") + "/") else path
        read = _FileRead(self._reading, metadata.size_in_bytes)
        try:
            with storage.open_text(path, errors="surrogateescape", inside=None) as text:
                read.watch(text)
                first_limit = HEADER_LIMIT if self._header else CSV_ROW_LIMIT
                yield from self._rows(path, key, bounded_rows(text, self._delimiter, first_limit), read)
        except (csv.Error, QuoteLeftOpen) as e:  # before the first row: the header cannot be parsed
            letter = DeadLetter(path, "header", f"malformed header: {e}")
            yield _whole_file_error(self._listed, self._errors, letter)
        except RecordTooLong as e:  # the header's: every row's is caught
            letter = DeadLetter(path, "header", f"its header is {e}, the most a header may hold")
            yield _whole_file_error(self._listed, self._errors, letter)
        except NotCsvText as e:  # its first line: it is read no further
            letter = DeadLetter(path, "read", f"{e} ({metadata.size_in_bytes:,} bytes): leave it out of --input")
            yield _whole_file_error(self._listed, self._errors, letter)
        except NotARegularFile as e:  # raised by the open, before any row (module docstring)
            yield _whole_file_error(self._listed, self._errors, DeadLetter(path, "read", str(e)))
        except (OSError, EOFError, zlib.error) as e:  # truncated or corrupt gzip, vanished, ...
            # Its rows past the failure are unknown, so no dead letter could weigh them: the run
            # fails (module docstring). One line, naming the file: the launcher reports it.
            raise UnreadableCsvError(
                f"{path} cannot be read to its end ({type(e).__name__}: {e}); the rows after the "
                "failure are unknown, so the run cannot account for them: repair or remove the file"
            ) from e
        read.done()

    def _rows(self, path, key, records, read: _FileRead):
        if self._header:
            _, header = next(records, (0, []))
            if isinstance(header, Exception):  # the header cannot be parsed, or is past its limit
                raise header
            header = tuple(without_padding(header))
            if not_text(header):  # a workbook, an archive, ...: none of its rows is quoted
                raise NotCsvText(self._delimiter.join(header))
            if header != self._columns:
                yield from self._other_header(path, header, records)
                return
        for count, (line, row) in enumerate(records, 1):
            if not count % READ_COUNT_ROWS:
                read.advance()
            where = f"{path}:{line}"
            if isinstance(row, Exception):
                self._listed.inc()
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(where, "parse", unreadable_row(row)))
                continue
            if not any(cell.strip() for cell in row):
                continue  # a blank line, or one of empty fields: no data, not a source
            self._listed.inc()
            problem = _row_problem(row, len(self._columns))
            if problem:
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(where, "parse", problem))
                continue
            values = tuple(row[: len(self._columns)])  # without padding past the last column
            yield from self._outputs(Row(where, self._split(f"{key}:{line}"), values), line)

    def _outputs(self, row: Row, line: int):
        """What the step outputs for a row read from line `line` of its file: the row."""
        yield row

    def _other_header(self, path, header, records):
        """Every row of a file with another header is a dead letter: they are not records (a row
        that cannot be parsed too: it is not blank). Each says how the header differs, column by
        column (header_difference), and that every row of the file is one for it, so that a report
        can show the file once (pipeline.report) and a rejection name the cause, not a budget
        (pipeline.publish)."""
        found = [line for line, row in records if row]
        reason = (
            f"the file's header differs from the dataset's: {header_difference(header, self._columns)}; so "
            f"{f'each of its {len(found):,} row(s)' if found else 'the file'} is a dead letter: give it the "
            "dataset's header, or leave it out of --input"
        )
        for where in [f"{path}:{line}" for line in found] or [path]:
            self._listed.inc()
            self._errors.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(where, "header", reason))


def header_difference(header: Sequence[str], columns: Sequence[str]) -> str:
    """How a file's `header` differs from the dataset's `columns`, naming only the columns that
    differ: those it lacks, those it adds, those it names more than once, and those it holds in
    another order (the shared columns outside the longest run of them both hold in one order)."""
    mine, theirs = set(header), set(columns)
    shared_here = [name for name in header if name in theirs]
    shared_there = [name for name in columns if name in mine]
    blocks = difflib.SequenceMatcher(None, shared_there, shared_here, autojunk=False).get_matching_blocks()
    in_order = {name for block in blocks for name in shared_there[block.a : block.a + block.size]}
    named_twice = [name for name, count in collections.Counter(header).items() if count > 1]
    parts = (
        ("it lacks", [name for name in columns if name not in mine]),
        ("it adds", [name for name in header if name not in theirs]),
        ("it names more than once", named_twice),
        ("it holds in another place", [name for name in shared_there if name not in in_order]),
    )
    return "; ".join(f"{what} {quoted(names)}" for what, names in parts if names)


def _row_problem(row, width):
    fields = row_fields(row, width)
    if fields != width:
        return f"expected {width} fields, found {fields}"
    return not_text(row)


@dataclasses.dataclass(slots=True)
class _Tally:
    """What InferSchema has seen of one column's non-empty values (and how many were empty)."""

    all_int: bool = True
    missing: int = 0
    numbers: int = 0
    not_numbers: int = 0  # counted up to STRAY_TEXT_LIMIT + 1
    least_not_number: tuple[str, str] | None = None  # (source, value)
    leading_zeros: int = 0  # numbers written with them
    least_leading_zero: tuple[str, str] | None = None  # (source, value)
    float32_moved: int = 0  # numbers float32 would move by 1 or more (moved_by_float32)
    least_float32_moved: tuple[str, str] | None = None  # (source, value)
    other_decimal: int = 0  # of the not_numbers, those that are numbers with the other decimal sign
    grouped_thousands: int = 0  # of those, the ones shaped as thousands grouped with that sign (1,234)
    # The label column's (csv.label) distinct values; None for other columns, and past MAX_CLASSES.
    values: set[str] | None = None
    too_many_values: bool = False

    def note_value(self, value: str) -> None:
        """A label column's value, held up to MAX_CLASSES distinct ones (label_column)."""
        if self.values is not None:
            self.values.add(value)
            if len(self.values) > MAX_CLASSES:
                self.values, self.too_many_values = None, True

    def text_column(self) -> bool:
        """Whether the column is text past doubt: its values need no more checks."""
        return self.not_numbers > STRAY_TEXT_LIMIT and self.other_decimal < self.not_numbers

    def count_number(self, source: str, value: str, decimal: str) -> None:
        self.numbers += 1
        if _LEADING_ZERO.match(value.lstrip()):
            self.leading_zeros += 1
            self.least_leading_zero = _least(self.least_leading_zero, (source, value))
        # Written in fewer than 8 characters without an exponent, a number is below FLOAT32_EXACT.
        if (len(value) > 7 or "e" in value or "E" in value) and moved_by_float32(value, decimal):
            self.float32_moved += 1
            self.least_float32_moved = _least(self.least_float32_moved, (source, value))

    def count_not_number(self, source: str, value: str, decimal: str) -> None:
        self.not_numbers += 1
        self.least_not_number = _least(self.least_not_number, (source, value))
        if other_decimal(value, decimal):
            self.other_decimal += 1
            self.grouped_thousands += bool(GROUPED_THOUSANDS[OTHER_DECIMAL[decimal]].fullmatch(value.strip()))


def _least(*noted: tuple[str, str] | None) -> tuple[str, str] | None:
    return min(filter(None, noted), default=None)


class InferSchema(beam.CombineFn):
    """Per column: dtype (declared, or the narrowest of int64 < float32 < string that fits every
    non-empty value), whether any record lacks it, and what the manifest's warnings name, since the
    trainer would otherwise get it without a word: the values that made a column of numbers string
    (up to STRAY_TEXT_LIMIT: a typo, a unit, a stray byte), or that are all numbers with the other
    decimal sign (46,70 where csv.decimal is '.': a file written in the other convention); of a
    column stored as numbers, the values written with leading zeros (zip codes, ids), which the
    numbers lose; of a float32 column, the numbers float32 moves by 1 or more (moved_by_float32).
    Numbers are read with the `decimal` sign (csv.decimal). Of the `label` column (csv.label), also
    its classes (transforms.label_column), after the `known` ones of a previous version."""

    def __init__(
        self,
        columns: Sequence[str],
        declared: dict[str, str],
        decimal: str = ".",
        label: str = "",
        known: tuple[str, ...] = (),
    ):
        self._columns, self._declared, self._decimal = tuple(columns), dict(declared), decimal
        self._label, self._known = label, tuple(known)
        self._label_at = self._columns.index(label) if label else None

    def create_accumulator(self) -> list[_Tally]:
        return [_Tally(values=set() if i == self._label_at else None) for i in range(len(self._columns))]

    def add_input(self, acc: list[_Tally], row: Row) -> list[_Tally]:
        decimal = self._decimal
        if self._label_at is not None and row.values[self._label_at]:
            acc[self._label_at].note_value(row.values[self._label_at])
        for tally, value in zip(acc, row.values, strict=True):
            if value == "":
                tally.missing += 1
            elif tally.text_column():
                continue
            elif tally.all_int and is_int64(value):
                tally.count_number(row.source, value, decimal)
            elif is_float(value, decimal):
                tally.all_int = False
                tally.count_number(row.source, value, decimal)
            else:
                tally.count_not_number(row.source, value, decimal)
        return acc

    def merge_accumulators(self, accumulators) -> list[_Tally]:
        merged = [
            _Tally(
                all_int=all(t.all_int for t in tallies),
                missing=sum(t.missing for t in tallies),
                numbers=sum(t.numbers for t in tallies),
                not_numbers=sum(t.not_numbers for t in tallies),
                least_not_number=_least(*(t.least_not_number for t in tallies)),
                leading_zeros=sum(t.leading_zeros for t in tallies),
                least_leading_zero=_least(*(t.least_leading_zero for t in tallies)),
                float32_moved=sum(t.float32_moved for t in tallies),
                least_float32_moved=_least(*(t.least_float32_moved for t in tallies)),
                other_decimal=sum(t.other_decimal for t in tallies),
                grouped_thousands=sum(t.grouped_thousands for t in tallies),
            )
            for tallies in zip(*accumulators, strict=True)
        ]
        if self._label_at is not None:
            label = merged[self._label_at]
            tallies = [acc[self._label_at] for acc in accumulators]
            label.too_many_values = any(t.too_many_values for t in tallies)
            label.values = None if label.too_many_values else set()
            for tally in tallies:
                for value in tally.values or ():
                    label.note_value(value)
        return merged

    def extract_output(self, acc: list[_Tally]) -> dict[str, ColumnType]:
        schema = {}
        for name, t in zip(self._columns, acc, strict=True):
            inferred = "string" if t.not_numbers else "int64" if t.all_int else "float32"
            declared = self._declared.get(name)
            convention = not declared and t.not_numbers and t.other_decimal == t.not_numbers
            other = NotedValues(t.not_numbers, t.numbers, *t.least_not_number) if convention else None
            few = not declared and 0 < t.not_numbers <= STRAY_TEXT_LIMIT and t.not_numbers < t.numbers
            stray = NotedValues(t.not_numbers, t.numbers, *t.least_not_number) if few and not convention else None
            zeros = not declared and inferred != "string" and t.leading_zeros
            leading = NotedValues(t.leading_zeros, t.numbers, *t.least_leading_zero) if zeros else None
            moved = not declared and inferred == "float32" and t.float32_moved
            rounded = NotedValues(t.float32_moved, t.numbers, *t.least_float32_moved) if moved else None
            grouped = bool(convention) and t.grouped_thousands == t.other_decimal
            dtype = declared or inferred
            values = None if t.too_many_values else t.values
            schema[name] = ColumnType(
                dtype,
                t.missing,
                stray,
                leading,
                rounded,
                other,
                grouped,
                self._decimal,
                label_classes(dtype, values, self._known) if name == self._label else None,
                tuple(label_warnings(name, dtype, values)) if name == self._label else (),
            )
        return schema


# The warnings of a column, in the order a run lists them: whether a column has one, and the one
# warning of every column that has it (named as `columns`, the first of them giving the example).
_WARNINGS = (
    (lambda name, found: name != name.strip(), lambda columns, found: spaced_name_warning(columns)),
    (lambda name, found: found.stray_text, lambda columns, found: stray_text_warning(columns, found.stray_text)),
    (
        lambda name, found: found.other_decimal,
        lambda columns, found: other_decimal_warning(
            columns, found.other_decimal, found.decimal, found.grouped_thousands
        ),
    ),
    (
        lambda name, found: found.leading_zeros,
        lambda columns, found: leading_zeros_warning(columns, found.dtype, found.leading_zeros, found.decimal),
    ),
    (
        lambda name, found: found.float32_moved,
        lambda columns, found: float32_warning(columns, found.float32_moved, found.decimal),
    ),
)


def column_warnings(column: str, found: ColumnType) -> list[str]:
    """What a user of the data is told of one column."""
    return schema_warnings({column: found})


def schema_warnings(schema: dict[str, ColumnType]) -> list[str]:
    """What a user of the data is told of its columns (the manifest's warnings): one warning of
    each kind, naming every column it is about, with the first of them as the example (a table of
    eleven columns written with a decimal comma is one warning, not eleven); and of its label
    column, why it has no classes."""
    warnings = [warning for found in schema.values() for warning in found.class_warnings]
    for applies, warning in _WARNINGS:
        named = [name for name, found in schema.items() if applies(name, found)]
        if named:
            warnings.append(warning(Columns(tuple(named)), schema[named[0]]))
    return warnings


@dataclasses.dataclass(frozen=True)
class Columns:
    """The columns a warning is about, as its sentence names them: `column 'a' is` or `columns
    'a', 'b' are`, and, of several, the one its example comes from."""

    names: tuple[str, ...]

    def __str__(self) -> str:
        return f"column {quoted(self.names[0])}" if len(self.names) == 1 else f"columns {quoted(self.names)}"

    def verb(self, one: str, several: str) -> str:
        return one if len(self.names) == 1 else several

    @property
    def example(self) -> str:
        """Where an example of several columns is from: `in column 'a', `; nothing for one."""
        return "" if len(self.names) == 1 else f"in column {quoted(self.names[0])}, "


def spaced_name_warning(columns: Columns) -> str:
    return (
        f"{columns} {columns.verb('has', 'have')} spaces around {columns.verb('its name', 'their names')}, which "
        f"{columns.verb('its feature key keeps', 'their feature keys keep')} (fields separated by ', '?); text "
        "values written so keep theirs too (numbers do not); write the file without the spaces, or read the "
        f"{columns.verb('key as it is', 'keys as they are')}"
    )


def _some(noted: NotedValues, have: str, has: str) -> str:
    """'1 of its N values has ...' / 'K of its N values have ...'."""
    if noted.count == 1:
        return f"1 of its {noted.numbers} values {has}"
    return f"{noted.count} of its {noted.numbers} values {have}"


def leading_zeros_warning(columns: Columns, dtype: str, noted: NotedValues, decimal: str = ".") -> str:
    """What a user is told of columns stored as numbers that some values wrote with leading zeros."""
    return (
        f"{columns} {columns.verb('is', 'are')} stored as {dtype}, which keeps no leading zeros: "
        f"{columns.example}{_some(noted, 'have them', 'has them')} (for example {noted.source}: "
        f"{quoted(noted.value)} is stored as {quoted(stored_value(noted.value, dtype, decimal))}); declare "
        f"{columns.verb('it', 'them')} in csv.schema as string to keep the values as written, or as {dtype} to keep "
        "the numbers without this warning"
    )


def float32_warning(columns: Columns, noted: NotedValues, decimal: str = ".") -> str:
    """What a user is told of float32 columns whose numbers float32 moves by 1 or more."""
    return (
        f"{columns} {columns.verb('is', 'are')} stored as float32, which holds numbers of {FLOAT32_EXACT:,} or more "
        f"only to the nearest of its steps (2 and up): {columns.example}{_some(noted, 'change', 'changes')} by 1 or "
        f"more (for example {noted.source}: {quoted(noted.value)} is stored as "
        f"{quoted(stored_value(noted.value, 'float32', decimal))}); declare {columns.verb('it', 'them')} in "
        "csv.schema as string to keep the values as written (or int64 if they are integers), or as float32 to keep "
        "them rounded without this warning"
    )


def other_decimal_warning(columns: Columns, noted: NotedValues, decimal: str, grouped_thousands: bool) -> str:
    """What a user is told of columns stored as strings because their numbers are written with the
    other decimal sign (46,70 where csv.decimal is '.')."""
    other = OTHER_DECIMAL[decimal]
    total = noted.count + noted.numbers
    whole = noted.count == total
    some = f"all {total} of its values are numbers" if whole else f"its values are numbers, {noted.count} of {total}"
    warning = (
        f"{columns} {columns.verb('is', 'are')} stored as strings, though {columns.example}{some} written with "
        f"{quoted(other)} before the fraction, which csv.decimal {quoted(decimal)} reads as text (for example "
        f"{noted.source}: {quoted(noted.value)}): if the file writes its numbers so, set csv.decimal: "
        f"{quoted(other)} (or declare the {columns.verb('column', 'columns')} string in csv.schema to keep the text "
        "without this warning)"
    )
    if grouped_thousands:
        warning += (
            f"; but each has 3 digits after its {quoted(other)}, as thousands grouped with it have (1{other}234 for "
            "1234): if they are such, neither setting reads them as numbers, so write them without the grouping"
        )
    return warning


def stray_text_warning(columns: Columns, stray: NotedValues) -> str:
    """What a user is told of columns that a few values made string."""
    total = stray.count + stray.numbers
    some = (
        f"1 of its {total} values is not a number"
        if stray.count == 1
        else f"{stray.count} of its {total} values are not numbers"
    )
    return (
        f"{columns} {columns.verb('is', 'are')} stored as strings: {columns.example}{some} (for example "
        f"{stray.source}: {quoted(stray.value)}); declare {columns.verb('it', 'them')} in csv.schema (float32 or "
        f"int64) to make such rows dead letters, or string to keep {columns.verb('it as it is', 'them as they are')}"
    )


class EncodeRows(beam.DoFn):
    """Row -> Record, typed by the (side input) schema, numbers read with the `decimal` sign
    (csv.decimal), the `label` column's value as its class (encode_row); a value that does not fit
    a declared type makes the row a dead letter, and so does a row without a label or whose Example
    TensorFlow could not parse. Rows count into the `converting` phase (transforms.progress),
    progress.COUNT_EVERY at a time and the rest at a bundle's end."""

    def __init__(self, columns: Sequence[str], decimal: str = ".", label: str = ""):
        self._columns, self._decimal, self._label = tuple(columns), decimal, label
        self._written, self._errors = counter("written"), counter("errors")
        self._converting, self._uncounted = progress.Phase("converting", "rows"), 0

    def finish_bundle(self):
        if self._uncounted:
            self._converting.add(self._uncounted)
            self._uncounted = 0

    def process(self, row: Row, schema):
        stopping.check()
        self._uncounted += 1
        if self._uncounted == progress.COUNT_EVERY:
            self._converting.add(self._uncounted)
            self._uncounted = 0
        outcome = encode_row(row, self._columns, schema, self._decimal, self._label)
        if isinstance(outcome, DeadLetter):
            self._errors.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)
            return
        self._written.inc()
        yield outcome


def encode_row(
    row: Row, columns: Sequence[str], schema: dict[str, ColumnType], decimal: str, label: str = ""
) -> Record | DeadLetter:
    """The row's Record, typed by `schema`, numbers read with the `decimal` sign; the `label`
    column's value stored as its class id where it is a string column with classes, and the
    Record labelled by its class (for the label counts); a dead letter when a value does not fit
    its declared type, when the label is empty, or when the Example would be too large to parse."""
    features, label_name = {}, ""
    for name, value in zip(columns, row.values, strict=True):
        if name == label:
            if value == "":
                return DeadLetter(row.source, "parse", f"no value in the label column {quoted(label)}")
            found = schema[name]
            if found.classes is not None and found.dtype == "string":
                features[name], label_name = found.class_ids[value], value
                continue
        if value == "":
            continue
        try:
            features[name] = parse_value(value, schema[name].dtype, decimal)
        except ValueError as e:
            return DeadLetter(row.source, "parse", f"column {quoted(name)}: {e}")
        if name == label and schema[name].classes is not None:
            label_name = str(features[name])
    try:
        return Record(row.split, label_name, False, encode_example(features), facts=features)
    except ExampleTooLarge as e:
        return DeadLetter(row.source, "encode", str(e))
