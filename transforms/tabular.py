"""Tabular CSV files (plain or .gz, one header each) to one Example per row.

Column types come from the configured schema or are inferred over all the data (a CombineFn, so
it scales): int64 if every value is an integer, float32 if every value is a number, string
otherwise; `bool` only when declared (true/false, stored as int64 1/0). Where an inferred dtype
holds values otherwise than as written (leading zeros, float32's rounding), the manifest's
warnings say so (column_warnings). A number is written as CSV tools write one: digits with an
optional sign, point and exponent, or nan/inf, never with Python's digit-grouping underscores
("2023_01" is text, not 202301). An empty cell means the feature is absent from that record. A
UTF-8 BOM at the start of a file is not part of its header.

A file that cannot be read to its end (a truncated or corrupt .gz, a file gone since the
listing) fails the run, naming the file: the rows it holds past the failure are unknown, so no
count of dead letters could weigh them against the error budget, and a run that loses an unknown
part of its input must not pass it. A malformed row is a dead letter, and so is each row of a file
with another header. A FIFO, socket or device matching the pattern (or a link to one) holds no
rows to lose, and reading it would wait for a writer or never end: it is not read, and is one
`read` dead letter, as a file whose header cannot be parsed is one `header` dead letter. A match
that cannot be listed (a dangling link: Beam's own matching drops it) is one `list` dead letter,
as in a class folder (`ListCsvFiles`). A wildcard does not match hidden names, as in a shell
(`data/**/*.csv` and `.ipynb_checkpoints/t-checkpoint.csv`, `data/*.csv` and macOS's `._t.csv`):
such a match is skipped as `(hidden)`, unless the pattern names hidden entries itself.
"""

from __future__ import annotations

import csv
import dataclasses
import re
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import apache_beam as beam

from pipeline import storage
from pipeline.local_files import NotARegularFile
from transforms import stopping
from transforms.counting import counter
from transforms.example_proto import ExampleTooLarge, encode_example
from transforms.outcomes import DEAD_LETTERS, SKIPPED, DeadLetter, Record, Skipped
from transforms.sources import HIDDEN, is_hidden, not_utf8, printable_path, relative_key, strip_bom, without_padding
from transforms.splits import assign_split

DECLARABLE_TYPES = ("int64", "float32", "string", "bool")
_INT = re.compile(r"^[+-]?\d+$")
_LEADING_ZERO = re.compile(r"[+-]?0\d")  # "007", "-01", "00.5": digits a number does not keep
FLOAT32_EXACT = 2**24  # float32 holds every integer up to this; past it, not even every integer
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_BOOLS = {"true": 1, "false": 0, "1": 1, "0": 0}


# Past this many values that are not numbers, a column is text: its values are no longer checked.
STRAY_TEXT_LIMIT = 100
# Characters a field may hold: Python's csv module stops at 131,072, which long texts (documents,
# articles) pass; past this, a field is more likely a quote left open than data.
CSV_FIELD_LIMIT = 64 * 2**20


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
    it is stored as numbers, those written with leading zeros, which a number does not keep; when
    it is stored as float32, the numbers that float32 moves by 1 or more (ids, timestamps)."""

    dtype: str  # one of DECLARABLE_TYPES
    missing: int
    stray_text: NotedValues | None = None
    leading_zeros: NotedValues | None = None
    float32_moved: NotedValues | None = None


class Row(NamedTuple):
    source: str  # file:line, for dead letters
    split: str
    values: tuple[str, ...]


def is_int64(value: str) -> bool:
    """Spaces around the digits allowed, as float() (is_float) and int() allow them: `1, 2` from a
    CSV written with ', ' between fields is two integers, not two float32s."""
    digits = value.strip()
    return bool(_INT.match(digits)) and _INT64_MIN <= int(digits) <= _INT64_MAX


def is_float(value: str) -> bool:
    if "_" in value:  # float() takes Python's digit grouping ("1_000"); CSV tools write no such number
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def float32_of(number: float) -> float:
    """What a float32 feature holds of `number` (protobuf rounds each float_list value so)."""
    return struct.unpack("f", struct.pack("f", number))[0]


def moved_by_float32(value: str) -> bool:
    """Whether float32 holds the number `value` writes 1 or more away from it: only numbers of
    FLOAT32_EXACT or more can be, such as ids, timestamps and large amounts."""
    number = float(value)
    if not abs(number) >= FLOAT32_EXACT:  # nan too
        return False
    held = float32_of(number)
    return held != number and not abs(held - number) < 1  # past float32's range: held as inf


def stored_value(value: str, dtype: str):
    """What a feature of `dtype` holds of a cell that fits it."""
    parsed = parse_value(value, dtype)
    return float32_of(parsed) if dtype == "float32" else parsed


def parse_value(value: str, dtype: str):
    """The typed value of a non-empty cell; ValueError names what is wrong."""
    if dtype == "string":
        return value.encode("utf-8")
    if dtype == "int64":
        if not is_int64(value):
            raise ValueError(f"{value!r} is not an int64")
        return int(value)
    if dtype == "float32":
        if not is_float(value):
            raise ValueError(f"{value!r} is not a number")
        return float(value)
    if dtype == "bool":
        if value.strip().lower() not in _BOOLS:
            raise ValueError(f"{value!r} is not true/false")
        return _BOOLS[value.strip().lower()]
    raise ValueError(f"unknown dtype {dtype!r}")


def read_header(uri: str) -> tuple[str, ...]:
    """The first line of a CSV file, as column names (a UTF-8 BOM before it is not part of them);
    ValueError when that line is not UTF-8. A bad byte in a later row is that row's dead letter
    (ReadCsvRows), so the header is decoded alone, not with the text read along with it."""
    with storage.open_text(uri, errors="surrogateescape") as text:
        header = tuple(without_padding(next(csv.reader(strip_bom(text)), [])))
    if not_utf8(header):
        raise ValueError(f"its header is not UTF-8 text: {list(header)!r}")
    return header


def _whole_file_error(listed, errors, letter: DeadLetter) -> beam.pvalue.TaggedOutput:
    """A file that gives no rows at all, as one dead letter: one source listed, one error."""
    listed.inc()
    errors.inc()
    return beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)


def hidden_match(pattern: str, path: str) -> bool:
    """Whether only a wildcard of `pattern` matched a hidden name in `path` (a file or folder name
    starting with "."), which a shell's wildcards never match; False where the pattern names
    hidden entries itself (`data/.cache/*.csv`)."""
    root = storage.pattern_root(pattern)
    return not is_hidden(pattern[len(root) + 1 :]) and is_hidden(relative_key(root, path))


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


class ReadCsvRows(beam.DoFn):
    """A CSV file -> Rows; a malformed row is a dead letter, and so is every row of a file whose
    header differs (its rows weigh in the error budget as rows; a file with none is one), and a
    FIFO or device (one)."""

    def __init__(self, root: str, columns: Sequence[str], fractions):
        self._root, self._columns, self._fractions = root, tuple(columns), tuple(fractions)
        self._listed, self._errors = counter("listed"), counter("errors")

    def setup(self):
        csv.field_size_limit(CSV_FIELD_LIMIT)  # the csv module's one setting, for every reader of this process

    def process(self, metadata):
        path = metadata.path
        key = relative_key(self._root, path) if path.startswith(self._root.rstrip("/") + "/") else path
        try:
            with storage.open_text(path, errors="surrogateescape") as text:
                yield from self._rows(path, key, csv.reader(strip_bom(text)))
        except csv.Error as e:  # before the first row: the header cannot be parsed
            letter = DeadLetter(path, "header", f"malformed header: {e}")
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

    def _rows(self, path, key, reader):
        header = tuple(without_padding(next(reader, [])))
        if header != self._columns:
            yield from self._other_header(path, header, reader)
            return
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                self._listed.inc()
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(
                    DEAD_LETTERS, DeadLetter(f"{path}:{reader.line_num}", "parse", f"malformed CSV: {e}")
                )
                continue
            if not any(cell.strip() for cell in row):
                continue  # a blank line, or one of empty fields: no data, not a source
            self._listed.inc()
            where = f"{path}:{reader.line_num}"
            problem = _row_problem(row, len(self._columns))
            if problem:
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(where, "parse", problem))
                continue
            values = tuple(row[: len(self._columns)])  # without padding past the last column
            yield Row(where, assign_split(f"{key}:{reader.line_num}", self._fractions), values)

    def _other_header(self, path, header, reader):
        """Every row of a file with another header is a dead letter: they are not records."""
        reason = f"the file's header {list(header)} differs from the dataset's {list(self._columns)}"
        lines = []
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error:
                row = ["malformed"]
            if row:
                lines.append(reader.line_num)
        for where in [f"{path}:{line}" for line in lines] or [path]:
            self._listed.inc()
            self._errors.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(where, "header", reason))


def _row_problem(row, width):
    fields = len(row) if len(row) <= width else max(width, len(without_padding(row)))  # padding is no field
    if fields != width:
        return f"expected {width} fields, found {fields}"
    if not_utf8(row):
        return "invalid UTF-8"
    return None


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

    def count_number(self, source: str, value: str) -> None:
        self.numbers += 1
        if _LEADING_ZERO.match(value.lstrip()):
            self.leading_zeros += 1
            self.least_leading_zero = _least(self.least_leading_zero, (source, value))
        # Written in fewer than 8 characters without an exponent, a number is below FLOAT32_EXACT.
        if (len(value) > 7 or "e" in value or "E" in value) and moved_by_float32(value):
            self.float32_moved += 1
            self.least_float32_moved = _least(self.least_float32_moved, (source, value))


def _least(*noted: tuple[str, str] | None) -> tuple[str, str] | None:
    return min(filter(None, noted), default=None)


class InferSchema(beam.CombineFn):
    """Per column: dtype (declared, or the narrowest of int64 < float32 < string that fits every
    non-empty value), whether any record lacks it, and what the manifest's warnings name, since the
    trainer would otherwise get it without a word: the values that made a column of numbers string
    (up to STRAY_TEXT_LIMIT: a typo, a unit, a stray byte); of a column stored as numbers, the
    values written with leading zeros (zip codes, ids), which the numbers lose; of a float32 column,
    the numbers float32 moves by 1 or more (moved_by_float32)."""

    def __init__(self, columns: Sequence[str], declared: dict[str, str]):
        self._columns, self._declared = tuple(columns), dict(declared)

    def create_accumulator(self) -> list[_Tally]:
        return [_Tally() for _ in self._columns]

    def add_input(self, acc: list[_Tally], row: Row) -> list[_Tally]:
        for tally, value in zip(acc, row.values, strict=True):
            if value == "":
                tally.missing += 1
            elif tally.not_numbers > STRAY_TEXT_LIMIT:  # a text column
                continue
            elif tally.all_int and is_int64(value):
                tally.count_number(row.source, value)
            elif is_float(value):
                tally.all_int = False
                tally.count_number(row.source, value)
            else:
                tally.not_numbers += 1
                tally.least_not_number = _least(tally.least_not_number, (row.source, value))
        return acc

    def merge_accumulators(self, accumulators) -> list[_Tally]:
        return [
            _Tally(
                all(t.all_int for t in tallies),
                sum(t.missing for t in tallies),
                sum(t.numbers for t in tallies),
                sum(t.not_numbers for t in tallies),
                _least(*(t.least_not_number for t in tallies)),
                sum(t.leading_zeros for t in tallies),
                _least(*(t.least_leading_zero for t in tallies)),
                sum(t.float32_moved for t in tallies),
                _least(*(t.least_float32_moved for t in tallies)),
            )
            for tallies in zip(*accumulators, strict=True)
        ]

    def extract_output(self, acc: list[_Tally]) -> dict[str, ColumnType]:
        schema = {}
        for name, t in zip(self._columns, acc, strict=True):
            inferred = "string" if t.not_numbers else "int64" if t.all_int else "float32"
            declared = self._declared.get(name)
            few = not declared and 0 < t.not_numbers <= STRAY_TEXT_LIMIT and t.not_numbers < t.numbers
            stray = NotedValues(t.not_numbers, t.numbers, *t.least_not_number) if few else None
            zeros = not declared and inferred != "string" and t.leading_zeros
            leading = NotedValues(t.leading_zeros, t.numbers, *t.least_leading_zero) if zeros else None
            moved = not declared and inferred == "float32" and t.float32_moved
            rounded = NotedValues(t.float32_moved, t.numbers, *t.least_float32_moved) if moved else None
            schema[name] = ColumnType(declared or inferred, t.missing, stray, leading, rounded)
        return schema


def column_warnings(column: str, found: ColumnType) -> list[str]:
    """What a user of the data is told of a column (the manifest's warnings)."""
    warnings = []
    if column != column.strip():
        warnings.append(spaced_name_warning(column))
    if found.stray_text:
        warnings.append(stray_text_warning(column, found.stray_text))
    if found.leading_zeros:
        warnings.append(leading_zeros_warning(column, found.dtype, found.leading_zeros))
    if found.float32_moved:
        warnings.append(float32_warning(column, found.float32_moved))
    return warnings


def spaced_name_warning(column: str) -> str:
    return (
        f"column {column!r} has spaces around its name, which its feature key keeps (fields separated by ', '?); "
        "text values written so keep theirs too (numbers do not); write the file without the spaces, or read "
        "the key as it is"
    )


def _some(noted: NotedValues, have: str, has: str) -> str:
    """'1 of its N values has ...' / 'K of its N values have ...'."""
    if noted.count == 1:
        return f"1 of its {noted.numbers} values {has}"
    return f"{noted.count} of its {noted.numbers} values {have}"


def leading_zeros_warning(column: str, dtype: str, noted: NotedValues) -> str:
    """What a user is told of a column stored as numbers that some values wrote with leading zeros."""
    return (
        f"column {column!r} is stored as {dtype}, which keeps no leading zeros: "
        f"{_some(noted, 'have them', 'has them')} (for example {noted.source}: {noted.value!r} is stored as "
        f"{stored_value(noted.value, dtype)!r}); declare it in csv.schema as string to keep the values as written, "
        f"or as {dtype} to keep the numbers without this warning"
    )


def float32_warning(column: str, noted: NotedValues) -> str:
    """What a user is told of a float32 column whose numbers float32 moves by 1 or more."""
    return (
        f"column {column!r} is stored as float32, which holds numbers of {FLOAT32_EXACT:,} or more only to the "
        f"nearest of its steps (2 and up): {_some(noted, 'change', 'changes')} by 1 or more (for example "
        f"{noted.source}: {noted.value!r} is stored as {stored_value(noted.value, 'float32')!r}); declare it in "
        "csv.schema as string to keep the values as written (or int64 if they are integers), or as float32 to keep "
        "them rounded without this warning"
    )


def stray_text_warning(column: str, stray: NotedValues) -> str:
    """What a user is told of a column that a few values made string."""
    total = stray.count + stray.numbers
    some = (
        f"1 of its {total} values is not a number"
        if stray.count == 1
        else f"{stray.count} of its {total} values are not numbers"
    )
    return (
        f"column {column!r} is stored as strings: {some} (for example {stray.source}: {stray.value!r}); declare "
        "it in csv.schema (float32 or int64) to make such rows dead letters, or string to keep it as it is"
    )


class EncodeRows(beam.DoFn):
    """Row -> Record, typed by the (side input) schema; a value that does not fit a declared type
    makes the row a dead letter, and so does a row whose Example TensorFlow could not parse."""

    def __init__(self, columns: Sequence[str]):
        self._columns = tuple(columns)
        self._written, self._errors = counter("written"), counter("errors")

    def process(self, row: Row, schema):
        stopping.check()
        features = {}
        for name, value in zip(self._columns, row.values, strict=True):
            if value == "":
                continue
            try:
                features[name] = parse_value(value, schema[name].dtype)
            except ValueError as e:
                self._errors.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(row.source, "parse", f"column {name!r}: {e}"))
                return
        try:
            record = Record(row.split, "", False, encode_example(features))
        except ExampleTooLarge as e:
            self._errors.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(row.source, "encode", str(e)))
            return
        self._written.inc()
        yield record
