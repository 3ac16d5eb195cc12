"""Reading the records of a CSV text within bounds, for both kinds of CSV input (tabular files,
transforms.tabular; CSVs of image URIs, transforms.sources) and for the planner's reads of them
alike: the one reader of CSV text (tests/test_bounded_parsers.py fails on any other).

Python's csv module builds a whole record before it hands it over, and reads its lines whole: a
line of a gigabyte without a line end, or a quote left open over millions of lines, would be held
in memory at once. Here each line is read with a limit and counted against its record, so a
record past CSV_ROW_LIMIT characters, CSV_DELIMITER_LIMIT delimiters or CSV_ROW_LINES lines is an
error of that record (RecordTooLong) read in bounded memory, and the next record is read on.

A quote left open swallows the rows after it into one quoted field, up to the next quote (which
then closes it) or the end of the file, and nothing fails. So a record that spans lines and is no
row is an error of its first line (QuoteLeftOpen), and the lines after that one are read again,
as rows (its lines are held for that, within the record's bounds): a record past a bound, a quoted
field still open at the end of the text, or one that closes with text after its quote (as a quote
left open closes on the next row's opening quote: `7,"text",x`; the csv module's `strict` reading).
In the lines read again, no record runs from one of them into the next: they were inside a quoted
field, so each holds its quotes in pairs and is a row on its own unless it opens a quote, which
is then left open too. So no line is read more than twice (three times, with the reading below),
and a quote left open costs work in proportion to the lines it took. A record on one line is read
as the csv module reads it without `strict` (`"a"b` is `ab`). Where records start does not depend
on where reading starts, so parts of a text cut where records start read as the whole text does
(CsvRecords.part_may_start). No Beam.
"""

from __future__ import annotations

import collections
import csv
from collections.abc import Iterator
from typing import NamedTuple, TextIO

# Characters a row may hold, all its fields and lines together: Python's csv module stops a field at
# 131,072, which long texts (documents, articles) pass; past this, a row is more likely a quote left
# open than data.
CSV_ROW_LIMIT = 64 * 2**20
# Delimiters a row may hold (quoted ones too): the csv module makes a field of every unquoted one,
# about 60 bytes each, so a row of nothing else would cost 25 times its text; a million keep the
# fields within the size of the text.
CSV_DELIMITER_LIMIT = 1_000_000
# Lines a row may span: quoted fields hold line ends (addresses, reviews, whole documents: a novel
# wrapped at 70 characters takes 15,000 lines, War and Peace 66,000). Past this, a row is more
# likely a quote left open than data.
CSV_ROW_LINES = 100_000


class RecordTooLong(ValueError):
    """A CSV record (header or row) past its limit in characters, delimiters or lines."""


class QuoteLeftOpen(ValueError):
    """A CSV record whose quoted field opens on its first line and is no field: it runs to the
    end of the text, into lines read again, or (the record spanning lines) past a bound or to a
    quote with text after it, when `read_again` says the lines after the first are read again."""

    def __init__(self, reason: str, read_again: bool = False):
        super().__init__(reason)
        self.read_again = read_again


class _Line(NamedTuple):
    """A line to hand out again: its text (or the error of a line too long to hold, skipped), where
    it starts (a byte offset) and its number."""

    text: str | RecordTooLong
    offset: int
    number: int


class BoundedLines:
    """The lines of a CSV text stream (opened with newline=""), for csv.reader, bounded per record.

    Each line is read with a limit (readline), never whole, and counted against the record it
    belongs to, which `start_record` opens before each `next(reader)`; the line that takes a record
    past its characters, delimiters or lines raises RecordTooLong through the reader (a line too
    long on its own is skipped to its end unread). The csv module starts its next record afresh,
    at the next line handed out. A record's lines after its first are held while it lasts, so
    that `read_again` hands them out again as the next ones; a record that would run from one of
    those into the next raises QuoteLeftOpen, and so does one still open at the end of the text.
    `line_num` is the number of the last line handed out, `offset` where the next one starts in
    bytes (of the text's UTF-8 form; exact for a text read with errors="surrogateescape"), from
    those of the text before it (`offset`, `line_num`: where a part of a CSV starts). A UTF-8 BOM
    at byte 0 is dropped."""

    def __init__(self, text: TextIO, delimiter: str, offset: int = 0, line_num: int = 0):
        self._readline, self._delimiter = text.readline, delimiter
        self._read_offset, self._read_lines = offset, line_num  # the stream's next line, and lines read
        self.line_num = line_num
        self._again: collections.deque[_Line] = collections.deque()
        self._limit = self._chars_left = self._delimiters_left = 0
        self._first: _Line | None = None  # the record's first line
        self._kept: list[_Line] = []  # its lines after the first

    @property
    def offset(self) -> int:
        return self._again[0].offset if self._again else self._read_offset

    @property
    def reading_again(self) -> bool:
        """Whether lines of an earlier record are still to be handed out again."""
        return bool(self._again)

    @property
    def first_line(self) -> int:
        """The number of the record's first line."""
        return self._first.number

    @property
    def spans_lines(self) -> bool:
        """Whether the record took lines after its first."""
        return bool(self._kept)

    def start_record(self, limit: int = CSV_ROW_LIMIT) -> None:
        self._limit = self._chars_left = limit
        self._delimiters_left = CSV_DELIMITER_LIMIT
        self._first = None
        if self._kept:
            self._kept = []

    def read_again(self, first: bool = False) -> None:
        """Hands out the record's lines after its first again (with its first too when `first`),
        before the stream's next; its own reading ends."""
        held = [self._first, *self._kept] if first else self._kept
        self._again.extendleft(reversed(held))
        self.line_num = self._first.number - (1 if first else 0)
        self.start_record(self._limit)

    def __iter__(self):
        return self

    def __next__(self) -> str:
        if self._first is not None:  # the record goes on: a quoted field holds the line end
            return self._counted(self._next_of_record())
        line = self._next_line()
        if line is None:
            raise StopIteration
        self._first = line
        return self._counted(line)

    def _next_of_record(self) -> _Line:
        if self._again:
            raise QuoteLeftOpen(
                "a quote left open: the quoted field that opens on this line runs into lines read again as rows"
            )
        if len(self._kept) + 1 >= CSV_ROW_LINES:
            raise RecordTooLong(f"spans more than {CSV_ROW_LINES:,} lines")
        line = self._next_line()
        if line is None:
            raise QuoteLeftOpen(
                "a quote left open: the quoted field that opens on this line runs to the end of the file"
            )
        self._kept.append(line)
        return line

    def _next_line(self) -> _Line | None:
        """The next line: one handed out again, else the stream's, read within the record's limit
        (a longer one is skipped to its end unread, and stands as its error); None at the end."""
        if self._again:
            return self._again.popleft()
        offset = self._read_offset
        text = self._readline(self._limit + 1)
        if not text:
            return None
        self._read_offset += _encoded_length(text)
        self._read_lines += 1
        if not offset:
            text = text.removeprefix("\ufeff")
        if len(text) > self._limit:
            while text[-1] not in "\r\n":  # the rest of the line, as much at a time
                text = self._readline(self._limit + 1)
                if not text:
                    break
                self._read_offset += _encoded_length(text)
            text = RecordTooLong(f"longer than {self._limit:,} characters")
        return _Line(text, offset, self._read_lines)

    def _counted(self, line: _Line) -> str:
        self.line_num = line.number
        text = line.text
        if isinstance(text, RecordTooLong):
            raise text
        self._chars_left -= len(text)
        if self._chars_left < 0:
            raise RecordTooLong(f"longer than {self._limit:,} characters")
        self._delimiters_left -= text.count(self._delimiter)
        if self._delimiters_left < 0:
            raise RecordTooLong(f"holds more than {CSV_DELIMITER_LIMIT:,} {self._delimiter!r}")
        return text


class CsvPart(NamedTuple):
    """A part of a CSV to read on its own (CsvRecords): from byte `start`, where a record starts
    after `line` lines, to the first record that starts at or after byte `end` (None: the end)."""

    start: int
    line: int
    end: int | None


WHOLE_CSV = (CsvPart(0, 0, None),)


def _encoded_length(line: str) -> int:
    return len(line) if line.isascii() else len(line.encode("utf-8", "surrogateescape"))


class CsvRecords:
    """(line number, fields) of each record of a CSV text opened with newline="", or (line number,
    the error) for a record past the limits (RecordTooLong), malformed (csv.Error) or that a quote
    left open made (QuoteLeftOpen, at its first line: the lines after it are read again); the
    records after it are read on. Line numbers are the record's last line, as csv.reader counts.
    The first record (a header) may hold `first_limit` characters.

    A part of a CSV is read from a stream opened at byte `start`, where a record starts, after
    `line` lines, up to the first record that starts at or after byte `end`. Between records,
    `offset` and `line` say where the next one starts, and `part_may_start` whether a part may
    start there: what a reader of the whole text notes to cut it into parts."""

    def __init__(
        self,
        text: TextIO,
        delimiter: str = ",",
        first_limit: int = CSV_ROW_LIMIT,
        start: int = 0,
        line: int = 0,
        end: int | None = None,
    ):
        self._lines = BoundedLines(text, delimiter, start, line)
        self._delimiter, self._first_limit, self._end = delimiter, first_limit, end

    @property
    def offset(self) -> int:
        return self._lines.offset

    @property
    def line(self) -> int:
        return self._lines.line_num

    @property
    def part_may_start(self) -> bool:
        """Whether a reader starting where the next record starts reads on as this one does: not
        among lines read again, which a reader starting there would read otherwise."""
        return not self._lines.reading_again

    def __iter__(self) -> Iterator[tuple[int, list[str] | Exception]]:
        csv.field_size_limit(CSV_ROW_LIMIT)  # the csv module's one setting, for every reader of this process
        lines = self._lines
        strict = csv.reader(lines, delimiter=self._delimiter, strict=True)
        lenient = csv.reader(lines, delimiter=self._delimiter)
        limit = self._first_limit
        while self._end is None or lines.offset < self._end:
            lines.start_record(limit)
            limit = CSV_ROW_LIMIT
            try:
                row = next(strict)
            except StopIteration:
                return
            except csv.Error as e:
                if lines.spans_lines:
                    yield self._error(e)
                    continue
                lines.read_again(first=True)  # one line: as the csv module reads it (`"a"b` is `ab`)
                try:
                    row = next(lenient)
                except (csv.Error, RecordTooLong, QuoteLeftOpen) as again:
                    yield self._error(again)
                    continue
            except (RecordTooLong, QuoteLeftOpen) as e:
                yield self._error(e)
                continue
            yield lines.line_num, row

    def _error(self, error: Exception) -> tuple[int, Exception]:
        if not self._lines.spans_lines:
            return self._lines.line_num, error
        if isinstance(error, RecordTooLong):
            return self._read_again(f"row {error}, the most a row may hold (a quote left open on this line?)")
        if isinstance(error, csv.Error):
            return self._read_again(f"malformed CSV on line {self._lines.line_num}: {error}")
        return self._read_again(str(error))

    def _read_again(self, reason: str) -> tuple[int, QuoteLeftOpen]:
        """The error of a record that spans lines, at its first line; its other lines are read again."""
        first = self._lines.first_line
        self._lines.read_again()
        return first, QuoteLeftOpen(reason, read_again=True)


def bounded_rows(
    text: TextIO, delimiter: str = ",", first_limit: int = CSV_ROW_LIMIT
) -> Iterator[tuple[int, list[str] | Exception]]:
    """Every record of a whole CSV text (CsvRecords)."""
    return iter(CsvRecords(text, delimiter, first_limit))


def unreadable_row(error: Exception) -> str:
    """Why a record bounded_rows gave as an error is no row (a dead letter's reason)."""
    if isinstance(error, RecordTooLong):
        return f"row {error}, the most a row may hold"
    if isinstance(error, QuoteLeftOpen) and error.read_again:
        return f"{error}; the lines after this one are read again, as rows of their own"
    if isinstance(error, QuoteLeftOpen):
        return str(error)
    return f"malformed CSV: {error}"
