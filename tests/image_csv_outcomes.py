"""The outcome of every row of an image CSV, resolved in memory: the reference the planner's
bounded tally (pipeline.image_csv_plan) and the job's grouping by URI are both checked against."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TextIO

from transforms.csv_records import CsvRecords
from transforms.sources import CsvRow, Outcome, Roots, image_csv_rows, resolve_duplicates

_NO_ROOTS = Roots()


def parse_image_csv(
    text: TextIO,
    csv_uri: str,
    uri_column: str,
    label_column: str,
    split_column: str,
    fractions: Sequence[tuple[str, float]],
    roots: Roots = _NO_ROOTS,
) -> Iterator[Outcome]:
    """Every non-blank row of a CSV of image URIs as a Source or a DeadLetter, in line order (in
    memory; the job groups rows by URI instead): `image_csv_rows`, then
    `resolve_duplicates` per image URI."""
    by_uri: dict[str, list[CsvRow]] = {}
    outcomes: list[tuple[int, Outcome]] = []
    for row in image_csv_rows(CsvRecords(text), csv_uri, uri_column, label_column, split_column, fractions, roots):
        if isinstance(row, CsvRow):
            by_uri.setdefault(row.source.uri, []).append(row)
        else:
            outcomes.append((int(row.source.rsplit(":", 1)[1]), row))
    for rows in by_uri.values():
        outcomes.extend(resolve_duplicates(rows))
    for _, outcome in sorted(outcomes, key=lambda o: o[0]):
        yield outcome
