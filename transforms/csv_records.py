"""Reading the records of a CSV text within bounds, for both kinds of CSV input (tabular files,
transforms.tabular; CSVs of image URIs, transforms.sources).

Python's csv module builds a whole record before it hands it over, and reads its lines whole: a
line of a gigabyte without a line end, or a quote left open over millions of lines, would be held
in memory at once. Here each line is read with a limit and counted against its record, so a
record past CSV_ROW_LIMIT characters or CSV_DELIMITER_LIMIT delimiters is an error of that record
(RecordTooLong) read in bounded memory, and the next record is read on. No Beam.
"""

from __future__ import annotations

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


class RecordTooLong(ValueError):
    """A CSV record (header or row) past its limit in characters or delimiters (BoundedLines)."""


class BoundedLines:
    """The lines of a CSV text stream (opened with newline=""), for csv.reader, bounded per record.

    Each line is read with a limit (readline), never whole, and counted against the record it
    belongs to, which `start_record` opens before each `next(reader)`; the line that takes a record
    past its characters or delimiters raises RecordTooLong through the reader, after the rest of
    that line is skipped unread into memory. The csv module starts its next record afresh, at the
    next line. `line_num` counts every line, skipped ones too (csv.reader's would not), and `offset`
    every byte (of the text's UTF-8 form; exact for a text read with errors="surrogateescape"), from
    those of the text before it (`offset`, `line_num`: where a part of a CSV starts). A UTF-8 BOM at
    byte 0 is dropped."""

    def __init__(self, text: TextIO, delimiter: str, offset: int = 0, line_num: int = 0):
        self._readline, self._delimiter = text.readline, delimiter
        self.offset, self.line_num = offset, line_num
        self._limit = self._chars_left = self._delimiters_left = 0

    def start_record(self, limit: int = CSV_ROW_LIMIT) -> None:
        self._limit = self._chars_left = limit
        self._delimiters_left = CSV_DELIMITER_LIMIT

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = self._readline(self._chars_left + 1)
        if not line:
            raise StopIteration
        at_start = not self.offset
        self.offset += _encoded_length(line)
        if at_start:
            line = line.removeprefix("\ufeff")
        self.line_num += 1
        self._chars_left -= len(line)
        if self._chars_left < 0:
            while line[-1] not in "\r\n":  # the rest of the line, as much at a time
                line = self._readline(self._limit + 1)
                if not line:
                    break
                self.offset += _encoded_length(line)
            raise RecordTooLong(f"longer than {self._limit:,} characters")
        self._delimiters_left -= line.count(self._delimiter)
        if self._delimiters_left < 0:
            raise RecordTooLong(f"holds more than {CSV_DELIMITER_LIMIT:,} {self._delimiter!r}")
        return line


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
    the error) for a record past the limits (RecordTooLong) or malformed (csv.Error); the records
    after it are read on. Line numbers are the record's last line, as csv.reader counts. The first
    record (a header) may hold `first_limit` characters.

    A part of a CSV is read from a stream opened at byte `start`, where a record starts, after
    `line` lines, up to the first record that starts at or after byte `end`. Between records,
    `offset` and `line` say where the next one starts: what a reader of the whole text notes to
    cut it into parts."""

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

    def __iter__(self) -> Iterator[tuple[int, list[str] | Exception]]:
        csv.field_size_limit(CSV_ROW_LIMIT)  # the csv module's one setting, for every reader of this process
        lines = self._lines
        reader = csv.reader(lines, delimiter=self._delimiter)
        limit = self._first_limit
        while self._end is None or lines.offset < self._end:
            lines.start_record(limit)
            limit = CSV_ROW_LIMIT
            try:
                row = next(reader)
            except StopIteration:
                return
            except (csv.Error, RecordTooLong) as e:
                yield lines.line_num, e
                continue
            yield lines.line_num, row


def bounded_rows(
    text: TextIO, delimiter: str = ",", first_limit: int = CSV_ROW_LIMIT
) -> Iterator[tuple[int, list[str] | Exception]]:
    """Every record of a whole CSV text (CsvRecords)."""
    return iter(CsvRecords(text, delimiter, first_limit))


def unreadable_row(error: Exception) -> str:
    """Why a record bounded_rows gave as an error is no row (a dead letter's reason)."""
    if isinstance(error, RecordTooLong):
        return f"row {error}, the most a row may hold"
    return f"malformed CSV: {error}"
