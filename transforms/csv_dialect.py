"""Which character separates the fields of a tabular CSV, decided once from its first lines.

Where the decimal separator is a comma (most of Europe), Excel saves "CSV" with `;` between fields,
and "Text (Tab delimited)" with tabs. Read at `,`, such a file is one column named `id;x;name`, and
nothing fails. So the planner splits the header and first rows of the first file at each candidate
and takes the one that splits them alike into more than one field; it refuses where two do so
equally well, and where the delimiter it takes (or was given: csv.delimiter) splits none of those
rows as it splits the header, naming the delimiter that does. The decision travels in the plan
(transforms.tabular.Columns), so every worker reads every file as the planner decided. No Beam.
"""

from __future__ import annotations

import csv
import dataclasses
import io

from transforms.sources import without_padding

AUTO = "auto"
CANDIDATES = (",", ";", "\t", "|")  # what spreadsheets and databases write between fields


@dataclasses.dataclass(frozen=True)
class CsvDialect:
    """How every file of a tabular dataset is read: the character between its fields, and the one
    its numbers write before their fraction (`.`, or `,`: 46,70 is 46.7)."""

    delimiter: str = ","
    decimal: str = "."

    def described(self) -> dict:
        """For the manifest's inputs: how every file was read."""
        return {"delimiter": self.delimiter, "decimal": self.decimal}


class DialectError(ValueError):
    """A delimiter that cannot be decided, or that splits the data otherwise than its header. One
    line, without the file's name (the caller puts it in front)."""


@dataclasses.dataclass(frozen=True)
class _Split:
    """A CSV's first lines split at one delimiter: the header's fields, and each row's."""

    header: int
    rows: tuple[int, ...]

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
    `Müller, Anna` from a `;` file), else `,`. DialectError when two candidates do equally well;
    when the header is one column but a candidate splits every row alike into more (a header that
    lacks names?); and when the one taken splits none of the rows as it splits the header (each
    would be a dead letter).
    """
    splits = {d: _split(head, d, whole) for d in dict.fromkeys((*CANDIDATES, setting)) if d != AUTO}
    if setting == AUTO:
        setting = _best(splits)
    chosen = splits[setting]
    better = [d for d, s in splits.items() if s.header > chosen.header and s.share == 1]
    if chosen.header == 1 and better and chosen.rows:
        raise DialectError(
            f"csv.delimiter {setting!r} makes it one column, but {better[0]!r} splits its header and first "
            f"{len(chosen.rows)} row(s) alike into {splits[better[0]].header}: set csv.delimiter: {better[0]!r} or auto"
        )
    if chosen.rows and not chosen.matching:
        raise DialectError(
            f"none of its first {len(chosen.rows)} row(s) has the header's {chosen.header} field(s) when split at "
            f"{setting!r} (they have {_counts(chosen.rows)}){_likely(splits, setting)}"
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
                f"{alike[0]!r}: name every column, or if it is one column, set csv.delimiter to a character its "
                "values do not hold"
            )
        return next((d for d in CANDIDATES if splits[d].share == 1), ",")
    most = max(s.share for s in viable.values())
    tied = [d for d, s in viable.items() if s.share == most]
    if len(tied) > 1 and most:
        described = " and ".join(f"{d!r} into {viable[d].header}" for d in tied)
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
        return f"; at {delimiter!r} its header and {matching} of them have {header}: set csv.delimiter: {delimiter!r}"
    alike = [(d, s) for d, s in splits.items() if len(set(s.rows)) == 1 and s.rows[0] > 1]
    if not alike:
        return "; check the character between its fields (csv.delimiter)"
    delimiter, split = alike[0]
    if delimiter == taken:
        return f"; they have {split.rows[0]} each: does its header lack names, or a value its quotes?"
    return f"; at {delimiter!r} its rows have {split.rows[0]} each, its header {split.header}: another file's header?"


def _counts(rows: tuple[int, ...]) -> str:
    """The field counts of some rows, fewest first: '1' or '1 to 3'."""
    return f"{min(rows)}" if min(rows) == max(rows) else f"{min(rows)} to {max(rows)}"


def row_fields(row: list[str], width: int) -> int:
    """The fields of a row of a CSV whose header has `width`: empty ones at its end past the
    width are padding (spreadsheet exports pad rows so), not fields."""
    return len(row) if len(row) <= width else max(width, len(without_padding(row)))


def _split(head: str, delimiter: str, whole: bool) -> _Split:
    """`head` split at `delimiter`: its header's fields and each non-blank row's (row_fields; a
    row csv cannot parse is left out, and so is the last unless `head` is the whole file)."""
    reader = csv.reader(io.StringIO(head, newline=""), delimiter=delimiter)
    header, rows = None, []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error:
            continue
        if header is None:
            header = len(without_padding(row))
        elif any(cell.strip() for cell in row):
            rows.append(row_fields(row, header))
    return _Split(header or 0, tuple(rows if whole else rows[:-1]))
