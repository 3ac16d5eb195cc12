"""`inspect DEST --report FILE.html`: one page a person opens to see what a dataset holds, in any
browser and offline: no script, no network, the styles and charts (SVG) inline, thumbnails as
data: URIs. Splits and labels as bar charts, the distributions of image sizes and bytes or of a
table's columns (from the statistics the job computed: transforms.dataset_statistics), formats,
colour modes and orientations (where images are stored resized, the page says so, and charts the
sources' full sizes beside the stored ones), dead letters by stage with the first of them, examples per class,
the manifest's warnings; for a refresh version, what changed since the one before it and, for one
held, why.

Every name on the page (labels, sources, columns, reasons) comes from the data, so the template
escapes all of it (Jinja2's autoescape): a label `<script>` is shown, never run."""

from __future__ import annotations

import base64
import dataclasses
import functools
import io
from collections.abc import Sequence

import jinja2
from PIL import Image
from tensorflow_metadata.proto.v0 import statistics_pb2

from core import storage
from core.contract.layout import join
from core.contract.manifest import Manifest
from pipeline.report import first_errors, stored_size_text
from pipeline.shard_records import read_shard
from pipeline.statistics_file import read_statistics
from pipeline.tfrecord_reader import RecordError
from pipeline.version_changes import VersionChanges, held_lines, shown_path
from transforms.example_proto import Example

TOP_SHOWN = 12  # most common values of a column shown
ERRORS_SHOWN = 20  # first dead letters listed
THUMBNAILS_PER_CLASS = 8
THUMBNAIL_RECORDS = 5000  # records read at most for the thumbnails
THUMBNAIL_SIDE = 96


@dataclasses.dataclass(frozen=True)
class ReportPage:
    """What the page shows, gathered by its caller (pipeline.commands.inspect)."""

    dest: str
    manifest: Manifest
    statistics: statistics_pb2.DatasetFeatureStatisticsList | None
    first_errors: Sequence[dict] = ()  # pipeline.report.first_errors
    thumbnails: Sequence[tuple[str, Sequence[str]]] = ()  # (label, data: URIs of its examples)
    changes: VersionChanges | None = None  # a refresh version's, since its previous version
    held: Sequence[str] = ()  # a held version's checks and what to do (version_changes.held_lines)


def write_report(folder: str, manifest: Manifest, path: str, changes: VersionChanges | None = None) -> None:
    """Writes the report of the dataset in `folder` to `path` (a local file or gs:// object), with
    the `changes` of a refresh version since its previous one (pipeline.version_changes)."""
    page = ReportPage(
        folder,
        manifest,
        read_statistics(folder, manifest),
        first_errors(folder, manifest, ERRORS_SHOWN)[0],
        example_thumbnails(folder, manifest),
        changes,
        held_lines(folder, manifest),
    )
    storage.write_atomically(path, render(page))


def example_thumbnails(folder: str, manifest: Manifest) -> list[tuple[str, list[str]]]:
    """Up to THUMBNAILS_PER_CLASS thumbnails (data: URIs) of each class of an image dataset, from
    its first records (shards are written in random order); none for a table. A shard that breaks
    ends the search: `--verify` is what names it."""
    if manifest.kind == "csv":
        return []
    keys, found, read = manifest.image_keys, {}, 0
    try:
        for split in manifest.splits.values():
            for shard in split.shards:
                for _, data in read_shard(
                    join(folder, shard), manifest.compression, manifest.file_format, inside=folder
                ):
                    feature = Example.FromString(data).features.feature
                    label = feature[keys["text"]].bytes_list.value[0].decode("utf-8", "replace")
                    if len(found.setdefault(label, [])) < THUMBNAILS_PER_CLASS:
                        found[label].append(_thumbnail(feature[keys["encoded"]].bytes_list.value[0]))
                    read += 1
                    full = len(found) >= len(manifest.label_map) and all(
                        len(uris) >= THUMBNAILS_PER_CLASS for uris in found.values()
                    )
                    if full or read >= THUMBNAIL_RECORDS:
                        return sorted(found.items())
    except RecordError:
        pass
    return sorted(found.items())


def _thumbnail(encoded: bytes) -> str:
    """A small JPEG of an image record's image, as a data: URI."""
    with Image.open(io.BytesIO(encoded)) as image:
        image.draft("RGB", (THUMBNAIL_SIDE * 2, THUMBNAIL_SIDE * 2))
        small = image.convert("RGB")
        small.thumbnail((THUMBNAIL_SIDE * 2, THUMBNAIL_SIDE * 2))
    out = io.BytesIO()
    small.save(out, "JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def render(page: ReportPage) -> str:
    """The page's HTML."""
    m = page.manifest
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("pipeline", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    numbers, categories = _columns(page.statistics)
    return environment.get_template("report.html").render(
        title=f"{m.kind} dataset {page.dest}",
        subtitle=f"run {m.run} · {len(m.splits)} split(s) · {m.file_format}, {m.compression}",
        stored_size=stored_size_text(m),
        kind=m.kind,
        counts=m.counts,
        splits=[(name, split.records) for name, split in m.splits.items()],
        label_counts=[(name, _by_count(split.label_counts)) for name, split in m.splits.items() if split.label_counts],
        numbers=numbers,
        categories=categories,
        columns=[(name, f.dtype) for name, f in m.features.items()] if m.kind == "csv" else [],
        errors_by_stage=_by_count(m.errors_by_stage),
        first_errors=list(page.first_errors),
        error_files=m.error_files,
        thumbnails=list(page.thumbnails),
        warnings=m.warnings,
        changes=page.changes,
        shown_path=functools.partial(shown_path, changes=page.changes),
        held=list(page.held),
    )


def _by_count(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _columns(statistics: statistics_pb2.DatasetFeatureStatisticsList | None) -> tuple[list[dict], list[dict]]:
    """The number columns (histogram, figures) and the text columns (most common values) of each
    split's statistics."""
    numbers, categories = [], []
    for dataset in statistics.datasets if statistics is not None else ():
        for feature in dataset.features:
            name = feature.path.step[0]
            if feature.HasField("num_stats"):
                numbers.append(_number_column(dataset, name, feature.num_stats))
            else:
                s = feature.string_stats
                top = [(b.label, int(b.sample_count)) for b in s.rank_histogram.buckets[:TOP_SHOWN]]
                categories.append(
                    {
                        "name": name,
                        "split": dataset.name,
                        "top": top,
                        "distinct": s.unique,
                        "missing": s.common_stats.num_missing,
                    }
                )
    return numbers, categories


def _number_column(dataset, name: str, stats: statistics_pb2.NumericStatistics) -> dict:
    standard, quantiles = (  # the histograms of both kinds
        next((h for h in stats.histograms if h.type == kind), statistics_pb2.Histogram())
        for kind in (statistics_pb2.Histogram.STANDARD, statistics_pb2.Histogram.QUANTILES)
    )
    edges = [b.low_value for b in quantiles.buckets] + [b.high_value for b in quantiles.buckets[-1:]]
    return {
        "name": name,
        "split": dataset.name,
        "buckets": list(standard.buckets),
        "min": stats.min,
        "median": stats.median,
        "max": stats.max,
        "mean": stats.mean,
        "std_dev": stats.std_dev,
        "missing": stats.common_stats.num_missing,
        "deciles": [f"{edge:.4g}" for edge in edges],
    }
