"""Turning listings into Sources: class folders and CSVs of image URIs.

The classification functions are pure so the planner (which sizes shards before the run) and the
pipeline (which lists again inside the job, keeping the job graph small) decide identically.
"""

from __future__ import annotations

import csv
import posixpath
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io import fileio

from pipeline import storage
from pipeline.contract.layout import join
from transforms.outcomes import DEAD_LETTERS, SKIPPED, DeadLetter, Skipped, Source, counter
from transforms.splits import assign_split, check_split_name

Outcome = Source | Skipped | DeadLetter

# AutoML-style split values and their split names; UNASSIGNED (or empty) means "hash it".
_AUTOML_SPLITS = {
    "train": "train",
    "training": "train",
    "validation": "validation",
    "valid": "validation",
    "val": "validation",
    "test": "test",
}
_UNASSIGNED = {"", "unassigned"}


def extension_of(path: str) -> str:
    """Lower-case extension ('.jpg'), or '' for names like '.DS_Store' and 'README'."""
    return posixpath.splitext(posixpath.basename(path))[1].lower()


def relative_key(root: str, path: str) -> str:
    """The path below the input root, with '/' separators, used for labels and split hashing."""
    root = root.rstrip("/")
    if not path.startswith(root + "/"):
        raise ValueError(f"{path} is not below {root}")
    return path[len(root) + 1 :]


def classify_folder_entry(
    root: str, path: str, extensions: frozenset[str], fractions: Sequence[tuple[str, float]]
) -> Outcome:
    """A file below `root`: an image in a class folder is a Source labelled by its first
    folder; a non-image file is skipped; an image directly in `root` cannot be labelled."""
    key = relative_key(root, path)
    extension = extension_of(path)
    if extension not in extensions:
        return Skipped(path, extension or "(none)")
    if "/" not in key:
        return DeadLetter(path, "label", "image is directly in the input folder, not in a class sub-folder <label>/")
    return Source(path, key, key.split("/", 1)[0], assign_split(key, fractions))


def resolve_uri(base_dir: str, uri: str) -> str:
    """URIs in a CSV are absolute (gs://..., /...) or relative to the CSV's folder."""
    if "://" in uri or uri.startswith("/"):
        return uri
    return join(base_dir, uri)


def parse_image_csv(
    lines: Iterable[str],
    csv_uri: str,
    uri_column: str,
    label_column: str,
    split_column: str,
    fractions: Sequence[tuple[str, float]],
) -> Iterator[Outcome]:
    """Rows of a CSV of image URIs as Sources or DeadLetters.

    With a header naming `uri_column`, columns are found by name (label required, split optional).
    Without one, the AutoML layout is assumed: `[split,]image_uri,label`.
    """
    base_dir = storage.parent(csv_uri)
    reader = csv.reader(lines)
    positions = None
    for row in reader:
        where = f"{csv_uri}:{reader.line_num}"
        if not row or not any(cell.strip() for cell in row):
            continue
        if positions is None:
            header = [cell.strip() for cell in row]
            if uri_column in header:
                if label_column not in header:
                    raise ValueError(f"{csv_uri}: header {header} has {uri_column!r} but no {label_column!r} column")
                positions = (
                    header.index(split_column) if split_column in header else None,
                    header.index(uri_column),
                    header.index(label_column),
                )
                continue
            positions = (0, 1, 2) if len(row) >= 3 else (None, 0, 1)
        split_at, uri_at, label_at = positions
        if len(row) <= max(p for p in positions if p is not None):
            yield DeadLetter(where, "parse", f"expected a URI and a label, found {len(row)} field(s)")
            continue
        uri, label = row[uri_at].strip(), row[label_at].strip()
        if not uri or not label:
            yield DeadLetter(where, "parse", "empty image URI" if not uri else f"no label for {uri}")
            continue
        split_value = row[split_at].strip().lower() if split_at is not None else ""
        if split_value in _UNASSIGNED:
            split = assign_split(uri, fractions)
        else:
            split = _AUTOML_SPLITS.get(split_value, split_value)
            try:
                check_split_name(split)
            except ValueError as e:
                yield DeadLetter(where, "parse", str(e))
                continue
        yield Source(resolve_uri(base_dir, uri), uri, label, split)


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


class _ClassifyFolderEntries(_Route):
    def __init__(self, root, extensions, fractions):
        super().__init__()
        self._args = (root, frozenset(extensions), tuple(fractions))

    def process(self, metadata):
        root, extensions, fractions = self._args
        yield from self.route(classify_folder_entry(root, metadata.path, extensions, fractions))


class _ParseImageCsv(_Route):
    def __init__(self, uri_column, label_column, split_column, fractions, splits):
        super().__init__()
        self._args = (uri_column, label_column, split_column, tuple(fractions))
        self._splits = frozenset(splits)

    def process(self, csv_uri):
        for outcome in parse_image_csv(storage.text_lines(csv_uri), csv_uri, *self._args):
            if isinstance(outcome, Source) and outcome.split not in self._splits:
                outcome = DeadLetter(
                    outcome.uri,
                    "parse",
                    f"split {outcome.split!r} is not one of the planned splits "
                    f"{sorted(self._splits)} (was the CSV edited during the run?)",
                )
            yield from self.route(outcome)


def _outputs(pcoll, dofn):
    return pcoll | beam.ParDo(dofn).with_outputs(SKIPPED, DEAD_LETTERS, main="sources")


@beam.ptransform_fn
def ListClassFolders(pbegin, root: str, extensions: Iterable[str], fractions):
    """Every file below `root` (listed inside the job, so the graph does not grow with it)."""
    return _outputs(
        pbegin | "MatchFiles" >> fileio.MatchFiles(root.rstrip("/") + "/**"),
        _ClassifyFolderEntries(root, extensions, fractions),
    )


@beam.ptransform_fn
def ReadImageCsv(pbegin, csv_uri: str, uri_column: str, label_column: str, split_column: str, fractions, splits):
    """Rows of the CSV as Sources; `splits` are the ones planned (each gets its own writer)."""
    return _outputs(
        pbegin | "CsvUri" >> beam.Create([csv_uri]),
        _ParseImageCsv(uri_column, label_column, split_column, fractions, splits),
    )
