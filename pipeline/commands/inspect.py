"""`python -m pipeline inspect DEST [--verify] [--contact_sheet FILE.png] [--samples N] [--report FILE.html]`

Shows what a converted dataset (local folder or gs:// prefix) holds: the manifest's splits,
shards, sizes, features, labels and error counts with the first reasons from the error reports
(pipeline.report). `--verify` reads and checks every record (pipeline.verify) and exits 1 on any
problem, naming its shard and record; `--contact_sheet` draws sample images (pipeline.contact_sheet);
`--report` writes one self-contained HTML page of the dataset (pipeline.html_report). A refresh
version is shown with what changed since the version before it (pipeline.version_changes) and,
when a drift check held it, the checks and the command that promotes it.

DEST may be a refresh ROOT: inspect follows ROOT/LATEST to the version it names, as the trainer
does. A folder holding only manifest.rejected.json (a run that must not be trusted) is shown as
REJECTED with its reasons and exits 1; --verify refuses it in one line and exits 1. Every file is
read as a regular file inside DEST (core.local_files.open_regular): a FIFO, a device, or a link out
of DEST (a version folder's included) is refused in one line, or, among the shards and reports,
named as a problem.
"""

from __future__ import annotations

import argparse
import os
import sys

from core import storage
from core.contract.folders import FolderKindError, dataset_folder
from core.contract.layout import ARRAY_RECORD, join
from core.contract.manifest import Manifest, ManifestError, ManifestRejectedError, read_manifest
from core.contract.tf_import import TensorFlowMissingError, import_tensorflow
from core.contract.versions import LatestPointerError
from core.local_files import LeadsOutside, NotARegularFile
from core.shown import show
from pipeline.contact_sheet import ContactSheetError, grid_shape, write_contact_sheet
from pipeline.flags import DEBUG_HELP, OneLineParser, command_name
from pipeline.html_report import write_report
from pipeline.report import dataset_summary, error_lines, rejected_summary
from pipeline.verify import unlisted_warnings, verify
from pipeline.version_changes import change_lines, held_lines, version_changes
from pipeline.version_store import held_version

MAX_PROBLEMS_SHOWN = 50
DEFAULT_SAMPLES = 16


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=command_name("inspect"),
        description="Show what a converted dataset (local or gs://) holds; --verify checks every "
        "record against the manifest; --contact_sheet draws sample images.",
        epilog=DEBUG_HELP,
    )
    p.add_argument(
        "dest",
        metavar="DEST",
        help="dataset folder or gs:// prefix (holds manifest.json), or a refresh root (follows its LATEST)",
    )
    p.add_argument("--verify", action="store_true", help="read and check every record; exit 1 on any problem")
    p.add_argument("--contact_sheet", metavar="FILE.png", help="write a grid of sample images with labels and sizes")
    p.add_argument(
        "--samples",
        type=int,
        default=DEFAULT_SAMPLES,
        metavar="N",
        help=f"images on the contact sheet (default {DEFAULT_SAMPLES})",
    )
    p.add_argument("--report", metavar="FILE.html", help="write one self-contained HTML page of what the dataset holds")
    return p


def _verify(dest: str, manifest: Manifest) -> int:
    result = verify(dest, manifest)
    total = sum(result.records.values())
    if result.problems:
        show(
            f"VERIFY FAILED: {len(result.problems)} problem(s) "
            f"({total} record(s) read from {len(result.shard_records)} shard(s)):",
            *(f"  {line}" for line in result.problems[:MAX_PROBLEMS_SHOWN]),
        )
        if len(result.problems) > MAX_PROBLEMS_SHOWN:
            show(f"  ... and {len(result.problems) - MAX_PROBLEMS_SHOWN} more")
        return 1
    checked = "hash-checked" if manifest.file_format == ARRAY_RECORD else "CRC-checked"  # chunks or records
    what = f"{checked}, parsed and decoded" if manifest.is_image_dataset else f"{checked} and parsed"
    show(
        f"verify OK: {total} record(s) in {len(result.shard_records)} shard(s) read, {what}; counts match the manifest"
    )
    return 0


def _resolve(path: str) -> str:
    """The folder to inspect: `path`, or the version its LATEST names when `path` is a refresh
    root, so inspect reads the dataset the trainer would read from the same path."""
    folder = dataset_folder(path, storage.text_reader(path), storage.children)
    if folder != path:
        root = path.rstrip("/")
        show(f"{root}/LATEST names version {storage.basename(folder)}: inspecting {folder}")
        held = held_version(root, storage.basename(folder))
        if held is not None:
            show(f"{root} also holds version {held[0]}, newer, held: python -m pipeline inspect {join(root, held[0])}")
    return folder


def _rejected(folder: str, manifest: Manifest, args: argparse.Namespace) -> int:
    """A rejected run is never a dataset: --verify refuses it in one line, otherwise show why it
    was rejected with its counts and first errors. Exits 1 either way, as the run itself did."""
    if args.verify:
        reasons = "; ".join(" ".join(r.split()) for r in manifest.rejected) or "no reason recorded"
        show(f"VERIFY REFUSED: {folder} holds a rejected run, not a dataset: {reasons}")
        return 1
    show(*rejected_summary(folder, manifest), *error_lines(folder, manifest))
    if args.contact_sheet:
        show(f"contact sheet: not drawn, {folder} holds a rejected run")
    return 1


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.samples <= 0:
        show("error: --samples must be positive", file=sys.stderr)
        return 2
    if args.verify or args.contact_sheet:
        try:  # before anything is read: without TensorFlow, one line naming the extra (exit 2)
            import_tensorflow("inspect --verify" if args.verify else "inspect --contact_sheet")
        except TensorFlowMissingError as e:
            show(f"error: {e}", file=sys.stderr)
            return 2
    try:
        folder = _resolve(args.dest)
        manifest = read_manifest(folder, storage.text_reader(args.dest))
        changes = version_changes(folder, manifest)
        show(
            *dataset_summary(folder, manifest),
            *(f"  warning: {warning}" for warning in unlisted_warnings(folder, manifest)),
            *error_lines(folder, manifest),
            *(change_lines(changes) if changes else ()),
            *held_lines(folder, manifest),
        )
        status = _verify(folder, manifest) if args.verify else 0
        if args.contact_sheet:
            tiles = write_contact_sheet(folder, manifest, args.contact_sheet, args.samples)
            columns, rows = grid_shape(tiles)
            show(f"contact sheet: {args.contact_sheet} ({tiles} image(s), {columns}x{rows} grid)")
        if args.report:
            write_report(folder, manifest, args.report, changes)
            show(f"report: {args.report} (open it in a browser)")
        return status
    except ManifestRejectedError as e:
        return _rejected(folder, e.manifest, args)
    except (ManifestError, LatestPointerError, FolderKindError, ContactSheetError, NotARegularFile, LeadsOutside) as e:
        missing = not storage.is_remote(args.dest) and not os.path.exists(args.dest)
        show(f"error: {args.dest} does not exist" if missing else f"error: {e}", file=sys.stderr)
        return 2
