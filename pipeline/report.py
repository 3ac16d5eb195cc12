"""What a person reads about a dataset: the summary at the end of a run (or why it was rejected),
and `inspect`'s account of a dataset; each with the first errors from the run's error reports and
where the whole reports are. Each is a list of lines, which the commands print through
core.shown.show: the names in a line (files, labels, columns, splits) are made printable there,
so none can forge a line or drive the terminal.

Sizes say what they measure: `MB serialized` is the records' tf.train.Example bytes as the manifest
counts them (before compression); `MB on disk (GZIP)` (or `(uncompressed)`, or `(ArrayRecord)`,
as the manifest's `compression` and `file_format` say) is the shard files' size, from one listing
of the dataset folder, left out when the shards cannot all be found (a rejected run's, which are
deleted)."""

from __future__ import annotations

import itertools

from core import storage
from core.contract.features import ORIGINAL_SIZE_KEYS
from core.contract.json_text import NotJson, json_lines
from core.contract.layout import ARRAY_RECORD, REJECTED_MANIFEST_NAME, REPORT_LINE_CHARS, join
from core.contract.manifest import Counts, Manifest
from pipeline.flags import command_name
from transforms.folder_layout import SPLIT_FOLDERS, FolderLayout
from transforms.image_resize import Resize
from transforms.outcomes import WHOLE_FILE_STAGES

FIRST_ERRORS_SHOWN = 5
SCANNED_LINES = 200_000  # of an error report, read at most for its first errors (a file's header rows are one)
_COMPRESSION_NAMES = {"GZIP": "GZIP", "NONE": "uncompressed"}


def _stored_as(manifest: Manifest) -> str:
    """`GZIP`, `uncompressed` or `ArrayRecord`, as the manifest's compression and file format say."""
    if manifest.file_format == ARRAY_RECORD:
        return "ArrayRecord"
    return _COMPRESSION_NAMES.get(manifest.compression, manifest.compression)


def on_disk_label(manifest: Manifest) -> str:
    """`MB on disk (GZIP)`, `(uncompressed)` or `(ArrayRecord)`, as the manifest says (_stored_as)."""
    return f"MB on disk ({_stored_as(manifest)})"


def bytes_on_disk(dest: str, manifest: Manifest) -> dict[str, int] | None:
    """Per split, the size of its shard files, from one listing of `dest`; None unless every shard
    the manifest names is there."""
    try:
        sizes = {m.path: m.size_in_bytes for m in storage.list_folder(dest)}
        return {s.name: sum(sizes[join(dest, shard)] for shard in s.shards) for s in manifest.splits.values()}
    except Exception:  # KeyError (a shard is missing) or a listing that failed: a summary never fails a run
        return None


def _counts_text(c: Counts) -> str:
    return f"listed {c.listed}, written {c.written} (converted {c.converted}), skipped {c.skipped}, errors {c.errors}"


def run_summary(manifest: Manifest, output: str, seconds: float) -> list[str]:
    """The summary `convert` and `refresh` print when the job has finished."""
    c = manifest.counts
    lines = [f"Dataset written to {output}", *_read_as(manifest), *_stored_size_lines(manifest)]
    on_disk = bytes_on_disk(output, manifest)
    for split in manifest.splits.values():
        disk = f", {on_disk[split.name] / 1e6:.1f} {on_disk_label(manifest)}" if on_disk is not None else ""
        lines.append(
            f"  {split.name:<12} {split.records:>9} records  {len(split.shards):>5} shard(s)  "
            f"{split.bytes / 1e6:9.1f} MB serialized{disk}"
        )
    lines.append(f"  {_counts_text(c)}")
    if c.errors:
        by_stage = ", ".join(f"{stage} {n}" for stage, n in manifest.errors_by_stage.items())
        lines += [f"  errors by stage: {by_stage}", *error_lines(output, manifest), _inspect_line(output)]
    lines += _warning_lines(manifest)
    rate = (c.listed - c.skipped) / seconds if seconds else 0.0
    lines.append(f"  elapsed {seconds:.1f} s, {rate:.0f} sources/s")
    return lines


def dataset_summary(dest: str, manifest: Manifest, title: str = "Dataset") -> list[str]:
    """`inspect`'s account of a dataset: splits, features, labels per split, source counts."""
    m, c = manifest, manifest.counts
    lines = [
        f"{title} {dest}",
        f"  kind {m.kind}, created {m.created or '?'} by pipeline {m.package_version or '?'}, "
        f"{'ArrayRecord files' if m.file_format == ARRAY_RECORD else _stored_as(m) + ' TFRecords'} of tf.train.Example",
        *_read_as(m),
        *_stored_size_lines(m),
    ]
    on_disk, disk_label = bytes_on_disk(dest, m), on_disk_label(m)
    width = len(disk_label)

    def disk(n: int | None) -> str:
        return f"  {n / 1e6:>{width}.1f}" if n is not None else ""

    lines.append(
        f"  {'split':<12} {'records':>9} {'shards':>7} {'MB serialized':>14}" + (f"  {disk_label}" if on_disk else "")
    )
    for s in m.splits.values():
        lines.append(
            f"  {s.name:<12} {s.records:>9} {len(s.shards):>7} {s.bytes / 1e6:>14.1f}"
            + disk(on_disk[s.name] if on_disk else None)
        )
    lines.append(
        f"  {'total':<12} {m.records:>9} {sum(len(s.shards) for s in m.splits.values()):>7} "
        f"{sum(s.bytes for s in m.splits.values()) / 1e6:>14.1f}" + disk(sum(on_disk.values()) if on_disk else None)
    )
    lines.append("  features:")
    for f in m.features.values():
        shape = f"[{','.join(map(str, f.shape))}]" if f.shape else ""
        lines.append(f"    {f.name:<24} {f.dtype}{shape}{'' if f.required else '  (optional: some records lack it)'}")
    if m.label_map:
        splits = list(m.splits)
        offset = f", label_offset {m.label_offset}" if m.label_offset else ""
        column = f" of column {m.label_column!r}" if m.label_column else ""
        lines.append(f"  labels{column} ({len(m.label_map)}{offset}):" + "".join(f" {name:>11}" for name in splits))
        for i, label in enumerate(m.label_map, m.label_offset):  # the values of the label feature
            counts = "".join(f" {m.splits[s].label_counts.get(label, 0):>11}" for s in splits)
            lines.append(f"    {i:>3} {label:<16}{counts}")
    budget = f"{100 * m.max_error_fraction:.2f}%{', EXCEEDED' if m.error_budget_exceeded else ''}"
    lines.append(f"  sources: {_counts_text(c)} ({100 * m.error_fraction:.2f}%, budget {budget})")
    if m.skipped_by_extension:
        lines.append(
            "  skipped by extension: " + ", ".join(f"{k or '(none)'} {v}" for k, v in m.skipped_by_extension.items())
        )
    if m.errors_by_stage:
        lines.append("  errors by stage: " + ", ".join(f"{k} {v}" for k, v in m.errors_by_stage.items()))
    lines += _warning_lines(m)
    return lines


def _read_as(manifest: Manifest) -> list[str]:
    """How the input was read where the run decided it from the data (the manifest's
    inputs.layout), so that a person sees the reading the records follow."""
    layout = manifest.inputs.get("layout") or {}
    if layout.get("folders") == SPLIT_FOLDERS:
        split_folders = FolderLayout.of(layout.get("split_folders", {})).split_folders
        return [f"  read as split folders: {', '.join(f'{folder}/ -> {split}' for folder, split in split_folders)}"]
    if "delimiter" in layout:
        header = "a header row" if layout.get("header", True) else "no header row"
        return [
            f"  read as CSV: {layout['delimiter']!r} between fields, {layout.get('decimal', '.')!r} before "
            f"fractions, {header}"
        ]
    return []


def stored_resize(manifest: Manifest) -> Resize | None:
    """The bound the images of `manifest` were stored within (Manifest.stored_bound), or None."""
    bound = manifest.stored_bound
    return Resize(**dict([bound])) if bound else None


def stored_size_text(manifest: Manifest) -> str:
    """How images are stored, where they are stored resized: the bound, the JPEG quality of the
    scaled-down ones and where each record keeps its full size; "" for any other dataset."""
    resize = stored_resize(manifest)
    if resize is None:
        return ""
    quality = manifest.options["image"].get("jpeg_quality")
    quality = f", JPEG quality {quality}" if isinstance(quality, int) else ""
    keys = [manifest.image_keys[role] for role in ORIGINAL_SIZE_KEYS if role in manifest.image_keys]
    full = f"; full sizes in {', '.join(keys)}" if keys else ""
    return f"images stored with their {resize.describe()} (image.resize){quality}{full}"


def _stored_size_lines(manifest: Manifest) -> list[str]:
    text = stored_size_text(manifest)
    return [f"  {text}"] if text else []


def _warning_lines(manifest: Manifest) -> list[str]:
    lines = [f"  warning: {warning}" for warning in manifest.warnings]
    if manifest.copies_files:
        lines.append(f"  every group of sources with the same bytes: {', '.join(manifest.copies_files)}")
    return lines


def rejected_summary(dest: str, manifest: Manifest) -> list[str]:
    """`inspect`'s account of a rejected run (manifest.rejected.json): why it must not be trusted
    first, then what it counted (dataset_summary), so a person can fix the input."""
    return [
        f"REJECTED: {dest} holds a run that must not be trusted, not a dataset. Reasons:",
        *_reason_lines(manifest),
        *dataset_summary(dest, manifest, title="Rejected run"),
    ]


def rejection_report(dest: str, manifest: Manifest) -> list[str]:
    """What `convert` and `refresh` print when their run was rejected: each reason (the budget one
    says which --max_error_fraction would have passed: pipeline.publish.over_budget), the first
    errors, and where the whole report is, `dest` being the folder that holds it."""
    lines = ["REJECTED: this run is not published. Reasons:", *_reason_lines(manifest), *error_lines(dest, manifest)]
    lines += [f"  rejected manifest: {join(dest, REJECTED_MANIFEST_NAME)}", _inspect_line(dest)]
    return lines


def _reason_lines(manifest: Manifest) -> list[str]:
    return [f"  - {reason}" for reason in manifest.rejected or ("(none recorded)",)]


def _inspect_line(dest: str) -> str:
    return f"  counts, errors and more: {command_name('inspect')} {dest}"


def first_errors(dest: str, manifest: Manifest, limit: int = FIRST_ERRORS_SHOWN) -> tuple[list[dict], int]:
    """The first `limit` errors of the error reports, and how many dead letters they stand for: the
    dead letters of a cause a whole file shares (a CSV's header: WHOLE_FILE_STAGES; each says so)
    are one error naming the file, not a line per row. Read no further than that, and than
    SCANNED_LINES lines: a report may hold millions, on gs://. A report that cannot be read is one
    letter saying so: a summary never fails a command."""
    letters, files, covered = [], set(), 0
    for name in manifest.error_files:
        if len(letters) >= limit:
            break
        try:
            with storage.open_text(join(dest, name), errors="replace", inside=dest) as text:
                for number, value in itertools.islice(json_lines(text, REPORT_LINE_CHARS), SCANNED_LINES):
                    letter = _letter(name, number, value)
                    whole_file = _whole_file(letter)
                    covered += 1
                    if whole_file in files:
                        continue
                    if whole_file:
                        files.add(whole_file)
                        letter = {**letter, "source": whole_file[0]}
                    if len(letters) == limit:
                        covered -= 1
                        break
                    letters.append(letter)
        except Exception as e:  # missing, or a storage error: say so instead of failing
            letters.append({"source": name, "stage": "?", "reason": f"cannot read the report: {e}"})
    return letters, covered


def _whole_file(letter: dict) -> tuple[str, str] | None:
    """(file, reason) of a dead letter whose cause its whole file shares (WHOLE_FILE_STAGES), whose
    source is the file or `file:line`; None for any other."""
    if letter.get("stage") not in WHOLE_FILE_STAGES:
        return None
    source = str(letter.get("source", ""))
    file, _, line = source.rpartition(":")
    return (file if file and line.isdigit() else source), str(letter.get("reason", ""))


def _letter(report: str, number: int, value) -> dict[str, str]:
    """The dead letter on line `number` of a report (json_text.json_lines' value), its source,
    stage and reason as text; a line that is not one is a letter saying so (a report may come
    from elsewhere: it describes the line, never quotes it)."""
    if isinstance(value, NotJson):
        return {"source": f"{report}:{number}", "stage": "?", "reason": f"unreadable line: it {value}"}
    if not isinstance(value, dict):
        return {"source": f"{report}:{number}", "stage": "?", "reason": "unreadable line: not a JSON object"}
    return {key: str(value.get(key, default)) for key, default in (("source", "?"), ("stage", "?"), ("reason", ""))}


def error_lines(dest: str, manifest: Manifest) -> list[str]:
    """The first errors (source, stage, reason) and the paths of the whole error reports; none for
    a run without errors."""
    if not manifest.counts.errors:
        return []
    letters, covered = first_errors(dest, manifest)
    lines = [f"  first errors ({covered} of {manifest.counts.errors}):"]
    for d in letters:
        lines.append(f"    [{d.get('stage', '?')}] {d.get('source', '?')}: {d.get('reason', '')}")
    lines.append(f"  all errors: {', '.join(join(dest, name) for name in manifest.error_files)}")
    return lines


LEAD_IN_LINES = 5  # of a message whose first line only introduces the lines after it, how many are kept


def first_line(message: str) -> str:
    """A message on one line: its first line, and when that only introduces the lines after it
    (it ends in ":", as Beam's "Pipeline has validations errors:" does before naming each missing
    option), those too, up to LEAD_IN_LINES of them, joined by "; "."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines or not lines[0].endswith(":") or len(lines) == 1:
        return message.splitlines()[0] if message else message
    more = "; ..." if len(lines) > 1 + LEAD_IN_LINES else ""
    return f"{lines[0]} {'; '.join(lines[1 : 1 + LEAD_IN_LINES])}{more}"
