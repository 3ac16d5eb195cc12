"""How the files of a tabular dataset are written, decided once from the first file's first lines:
the character between fields, the sign before a number's fraction, and whether the first row is a
header.

Where the decimal separator is a comma (most of Europe), Excel saves "CSV" with `;` between fields,
and "Text (Tab delimited)" with tabs. Read at `,`, such a file is one column named `id;x;name`, and
nothing fails. So the planner splits the header and first rows of the first file at each candidate
and takes the one that splits them alike into more than one field; it refuses where two do so
equally well, and where the delimiter it takes (or was given: csv.delimiter) splits none of those
rows as it splits the header, naming the delimiter that does.

Where numbers are written with a decimal comma (46,70), read with `.` they are text, and every
number column would be stored as strings; where a file has no header, its first row of data would
name the features (`5.1`, `3.5`, `setosa`). So the numbers decide the decimal sign (`,` where the
first rows write numbers with a comma before their fraction and none with a point), and the types
decide the header: a first row whose cells do not fit the types of the columns below it (text
over numbers or dates) is a header, one whose cells fit them is data. A table of text alone shows
neither, and is read with a header, as pandas reads one. Each can be set instead (csv.delimiter,
csv.decimal, csv.header). The decision travels in the plan (CsvDialect), so every worker reads
every file as the planner decided. No Beam.
"""

from __future__ import annotations

import dataclasses
import io
import re

from core.shown import quoted
from transforms.csv_numbers import GROUPED_THOUSANDS, is_float, is_int64
from transforms.csv_records import CsvRecords, QuoteLeftOpen
from transforms.sources import without_padding

AUTO = "auto"
CANDIDATES = (",", ";", "\t", "|")  # what spreadsheets and databases write between fields


@dataclasses.dataclass(frozen=True)
class CsvDialect:
    """How every file of a tabular dataset is read: the character between its fields, the one its
    numbers write before their fraction (`.`, or `,`: 46,70 is 46.7), and whether its first row is
    a header (else every row is data)."""

    delimiter: str = ","
    decimal: str = "."
    header: bool = True

    def described(self) -> dict:
        """For the manifest's inputs: how every file was read."""
        return {"delimiter": self.delimiter, "decimal": self.decimal, "header": self.header}


class DialectError(ValueError):
    """A delimiter that cannot be decided, or that splits the data otherwise than its header. One
    line, without the file's name (the caller puts it in front)."""


def choose_dialect(
    head: str, delimiter: str = AUTO, decimal: str = AUTO, header: str | bool = AUTO, whole: bool = True
) -> CsvDialect:
    """The dialect of a CSV whose first lines are `head`: each of `delimiter` (choose_delimiter),
    `decimal` (choose_decimal) and `header` (has_header) as set, or for `auto` as those lines show.
    `whole`: they are the whole file. DialectError as choose_delimiter raises it."""
    chosen = choose_delimiter(head, delimiter, whole)
    rows = head_rows(head, chosen, whole)
    if decimal == AUTO:
        decimal = choose_decimal(rows)
    return CsvDialect(chosen, decimal, has_header(rows, decimal) if header == AUTO else header)


def choose_decimal(rows: list[list[str]]) -> str:
    """`,` where the cells of `rows` write numbers with a comma before their fraction (46,70) and
    none with a point (46.7), unless each such comma stands where grouped thousands have one
    (1,234: a thousand and more, or a number with three decimals?); else `.`."""
    comma, point, grouped = 0, 0, 0
    for row in rows:
        for cell in row:
            value = cell.strip()
            if "," in value and is_float(value, ","):
                comma += 1
                grouped += bool(GROUPED_THOUSANDS[","].fullmatch(value))
            elif "." in value and is_float(value, "."):
                point += 1
    return "," if comma and not point and grouped < comma else "."


# A date or time as data tools write one: 2024-01-31, 2024-01-31T12:00:00Z, 31/01/2024, 31.01.2024.
_DATE = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}"
)


def _cell_type(cell: str, decimal: str) -> str | None:
    """`number`, `date` or `text`; None for an empty cell, which fits any column."""
    value = cell.strip()
    if not value:
        return None
    if is_int64(value) or is_float(value, decimal):
        return "number"
    return "date" if _DATE.fullmatch(value) else "text"


def has_header(rows: list[list[str]], decimal: str = ".") -> bool:
    """Whether the first of `rows` (a CSV's first rows, split) is a header: whether a cell of it
    stands over a column of numbers or dates without being one (a name over values), or else none
    is one over such a column (a value among values). The header pandas writes for a frame without
    column names (`,0,1,2`) is one too. A file of one row, or of text alone, tells nothing either
    way: it has a header, as pandas assumes. Names that are all numbers over numbers (years) read
    as data: the run's warnings say which way it went (csv.header decides)."""
    if len(rows) < 2:
        return True
    first, below = rows[0], rows[1:]
    if _index_names(first):
        return True
    names = values = 0
    for column, cell in enumerate(first):
        kinds = {_cell_type(row[column], decimal) for row in below if column < len(row)} - {None}
        kind = _cell_type(cell, decimal)
        if len(kinds) != 1 or kinds == {"text"} or kind is None:
            continue  # text, mixed or empty below, or an empty cell on top: no sign either way
        if kind in kinds:
            values += 1
        else:
            names += 1
    return bool(names) or not values


def header_warnings(dialect: CsvDialect, columns: tuple[str, ...], named: bool) -> list[str]:
    """What a user of the data should hear of a header the run decided (csv.header: auto) from the
    first rows: that there is none, and what the columns are named then (unless csv.columns
    `named` them, which says there is none), or that the one it read names columns with numbers or
    dates, as a row of data would."""
    if not dialect.header:
        if named:
            return []
        return [
            "the CSV files have no header row: the first file's first row fits the types of the columns below it, "
            f"so it is data, and the columns are named {columns[0]} .. {columns[-1]}; name them with csv.columns, or "
            "if that row names the columns, set csv.header: true"
        ]
    typed = [name for name in columns if _cell_type(name, dialect.decimal) in ("number", "date")]
    if not typed:
        return []
    shown = quoted(typed)
    return [
        f"the first row of the CSV files is read as their header, but it names column(s) {shown} with numbers or "
        "dates, as a row of data would: if that row is data, set csv.header: false"
    ]


def _index_names(row: list[str]) -> bool:
    """Whether a row is the header pandas' to_csv writes for a frame whose columns have no names:
    an empty cell (its index's) and 0, 1, 2, ..."""
    cells = [cell.strip() for cell in without_padding(row)]
    return len(cells) > 2 and not cells[0] and cells[1:] == [str(n) for n in range(len(cells) - 1)]


@dataclasses.dataclass(frozen=True)
class _Split:
    """A CSV's first lines split at one delimiter: the header's fields, and each row's."""

    header: int
    rows: tuple[int, ...]
    # How much its cells look like values (header and rows alike): +1 for each number (with either
    # decimal sign) or date, -1 for each other cell that holds another candidate delimiter.
    fit: int = 0

    @property
    def matching(self) -> int:
        """The rows with as many fields as the header: those a run would make records of."""
        return sum(fields == self.header for fields in self.rows)

    @property
    def share(self) -> float:
        """The share of the rows that match (1 without rows). A share, not a count: where quotes
        open at one delimiter and not at another, the rows are not the same records."""
        return self.matching / len(self.rows) if self.rows else 1.0


def choose_delimiter(head: str, setting: str = AUTO, whole: bool = True) -> str:
    """The delimiter to read a CSV whose first lines are `head` (its header, then rows) with;
    `whole`: they are the whole file (else their last record may be cut, and is left out).

    `setting` (csv.delimiter) is taken as given, unless it makes one column of a header and rows
    that a candidate splits alike into more. `auto` takes the candidate that splits the header into
    more than one field and the largest share of the rows into as many; when none splits the header
    (a one-column CSV), the first that splits no row (a value holding another file's delimiter:
    `Müller, Anna` from a `;` file), else `,`; of candidates that do equally well, the one whose
    cells look most like values (_fit: `5,1;3,5` is two numbers at `;`, and `1;3` a piece of text
    at `,`), as a file without a header needs. DialectError when two candidates still do equally well;
    when the header is one column but a candidate splits every row alike into more (a header that
    lacks names?); and when the one taken splits none of the rows as it splits the header (each
    would be a dead letter).
    """
    splits = {d: _split(head, d, whole) for d in dict.fromkeys((*CANDIDATES, setting)) if d != AUTO}
    if setting == AUTO:
        setting = _best(splits)
    chosen = splits[setting]
    better = [d for d, s in splits.items() if s.header > chosen.header and s.share == 1 and s.rows]
    if chosen.header == 1 and better:  # its rows at `setting` may be none: a quote it leaves open
        raise DialectError(
            f"csv.delimiter {quoted(setting)} makes it one column, but {quoted(better[0])} splits its header and "
            f"first {len(splits[better[0]].rows)} row(s) alike into {splits[better[0]].header}: set csv.delimiter: "
            f"{quoted(better[0])} or auto"
        )
    if chosen.rows and not chosen.matching:
        raise DialectError(
            f"none of its first {len(chosen.rows)} row(s) has the header's {chosen.header} field(s) when split at "
            f"{quoted(setting)} (they have {_counts(chosen.rows)}){_likely(splits, setting)}"
        )
    return setting


def _best(splits: dict[str, _Split]) -> str:
    """The candidate that splits the header into more than one field and the largest share of the
    rows alike (where none splits a row so, the first: choose_delimiter refuses it, saying why);
    for one column, the first that splits no row."""
    viable = {d: s for d, s in splits.items() if d in CANDIDATES and s.header > 1}
    if not viable:
        alike = [d for d in CANDIDATES if len(set(splits[d].rows)) == 1 and splits[d].rows[0] > 1]
        if alike:
            rows = splits[alike[0]].rows
            raise DialectError(
                f"its header names one column, but each of its first {len(rows)} row(s) has {rows[0]} fields at "
                f"{quoted(alike[0])}: name every column, or if it is one column, set csv.delimiter to a character its "
                "values do not hold"
            )
        return next((d for d in CANDIDATES if splits[d].share == 1), ",")
    most = max(s.share for s in viable.values())
    tied = [d for d, s in viable.items() if s.share == most]
    fit = max(viable[d].fit for d in tied)
    if len(tied) > 1 and [viable[d].fit for d in tied].count(fit) == 1:
        tied = [d for d in tied if viable[d].fit == fit]  # its cells are values, the others' pieces of them
    if len(tied) > 1 and most:
        described = " and ".join(f"{quoted(d)} into {viable[d].header}" for d in tied)
        raise DialectError(
            f"its header and first rows split equally well at {described} fields: set csv.delimiter to the one "
            "it was written with"
        )
    return tied[0]


def _likely(splits: dict[str, _Split], taken: str) -> str:
    """What to add where the delimiter `taken` splits no row as it splits the header: the candidate
    that splits the most rows as it splits the header, if one does; else where the rows split
    alike, which the header does not."""
    others = [(s.matching, s.header, d) for d, s in splits.items() if d != taken and s.header > 1 and s.matching]
    if others:
        matching, header, delimiter = max(others)
        at = quoted(delimiter)
        return f"; at {at} its header and {matching} of them have {header}: set csv.delimiter: {at}"
    alike = [(d, s) for d, s in splits.items() if len(set(s.rows)) == 1 and s.rows[0] > 1]
    if not alike:
        return "; check the character between its fields (csv.delimiter)"
    delimiter, split = alike[0]
    if delimiter == taken:
        return f"; they have {split.rows[0]} each: does its header lack names, or a value its quotes?"
    at = quoted(delimiter)
    return f"; at {at} its rows have {split.rows[0]} each, its header {split.header}: another file's header?"


def _counts(rows: tuple[int, ...]) -> str:
    """The field counts of some rows, fewest first: '1' or '1 to 3'."""
    return f"{min(rows)}" if min(rows) == max(rows) else f"{min(rows)} to {max(rows)}"


def row_fields(row: list[str], width: int) -> int:
    """The fields of a row of a CSV whose header has `width`: empty ones at its end past the
    width are padding (spreadsheet exports pad rows so), not fields."""
    return len(row) if len(row) <= width else max(width, len(without_padding(row)))


def _split(head: str, delimiter: str, whole: bool) -> _Split:
    """`head` split at `delimiter`: its header's fields and each row's (row_fields), and how many of
    its cells are numbers or dates."""
    rows = head_rows(head, delimiter, whole)
    if not rows:
        return _Split(0, ())
    header = len(without_padding(rows[0]))
    fit = sum(_fit(cell) for row in rows for cell in row)
    return _Split(header, tuple(row_fields(row, header) for row in rows[1:]), fit)


def _fit(cell: str) -> int:
    """-1 for a cell holding a candidate delimiter (`1;3` read at `,`: a piece of two values),
    unless it is a number with a decimal comma; +1 for a number (either decimal sign) or a date;
    else 0."""
    held = [d for d in CANDIDATES if d in cell]
    if held and not (held == [","] and is_float(cell.strip(), ",")):
        return -1
    return int(_cell_type(cell, ".") not in (None, "text") or _cell_type(cell, ",") not in (None, "text"))


def head_rows(head: str, delimiter: str, whole: bool) -> list[list[str]]:
    """A CSV's first lines, `head`, split at `delimiter` as the job reads them (csv_records): its
    first row, then each non-blank row. A record that is no row is left out, and so is the last
    unless `head` is the whole file (it may be cut), and all from a quoted field that the cut
    leaves open (its lines are not rows)."""
    rows = []
    for _, row in CsvRecords(io.StringIO(head, newline=""), delimiter):
        if isinstance(row, QuoteLeftOpen) and not whole:
            return rows
        if isinstance(row, Exception):
            continue
        if not rows or any(cell.strip() for cell in row):
            rows.append(row)
    return rows if whole or len(rows) < 2 else rows[:-1]
