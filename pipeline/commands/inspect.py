"""`python -m pipeline inspect DEST [--verify] [--contact_sheet FILE.png] [--samples N]`

Shows what a converted dataset (local folder or gs:// prefix) holds: the manifest's splits,
shards, sizes, features, labels and error counts with the first reasons from the error reports
(pipeline.report). `--verify` reads and checks every record (pipeline.verify) and exits 1 on any
problem, naming its shard and record; `--contact_sheet` draws sample images (pipeline.contact_sheet).
"""

from __future__ import annotations

import argparse
import sys

from pipeline import storage
from pipeline.contact_sheet import ContactSheetError, grid_shape, write_contact_sheet
from pipeline.contract.manifest import Manifest, ManifestError, read_manifest
from pipeline.report import dataset_summary, errors_text, first_errors
from pipeline.verify import verify

MAX_PROBLEMS_SHOWN = 50
DEFAULT_SAMPLES = 16


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pipeline inspect",
        description="Show what a converted dataset (local or gs://) holds; --verify checks every "
        "record against the manifest; --contact_sheet draws sample images.",
    )
    p.add_argument("dest", metavar="DEST", help="dataset folder or gs:// prefix (holds manifest.json)")
    p.add_argument("--verify", action="store_true", help="read and check every record; exit 1 on any problem")
    p.add_argument("--contact_sheet", metavar="FILE.png", help="write a grid of sample images with labels and sizes")
    p.add_argument(
        "--samples",
        type=int,
        default=DEFAULT_SAMPLES,
        metavar="N",
        help=f"images on the contact sheet (default {DEFAULT_SAMPLES})",
    )
    return p


def _verify(dest: str, manifest: Manifest) -> int:
    result = verify(dest, manifest)
    total = sum(result.records.values())
    if result.problems:
        print(
            f"VERIFY FAILED: {len(result.problems)} problem(s) "
            f"({total} record(s) read from {len(result.shard_records)} shard(s)):"
        )
        for line in result.problems[:MAX_PROBLEMS_SHOWN]:
            print(f"  {line}")
        if len(result.problems) > MAX_PROBLEMS_SHOWN:
            print(f"  ... and {len(result.problems) - MAX_PROBLEMS_SHOWN} more")
        return 1
    what = "CRC-checked, parsed and decoded" if manifest.is_image_dataset else "CRC-checked and parsed"
    print(
        f"verify OK: {total} record(s) in {len(result.shard_records)} shard(s) read, {what}; counts match the manifest"
    )
    return 0


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.samples <= 0:
        print("error: --samples must be positive", file=sys.stderr)
        return 2
    try:
        manifest = read_manifest(args.dest, storage.read_text)
        print(dataset_summary(args.dest, manifest))
        text = errors_text(first_errors(args.dest, manifest), manifest)
        if text:
            print(text)
        status = _verify(args.dest, manifest) if args.verify else 0
        if args.contact_sheet:
            tiles = write_contact_sheet(args.dest, manifest, args.contact_sheet, args.samples)
            columns, rows = grid_shape(tiles)
            print(f"contact sheet: {args.contact_sheet} ({tiles} image(s), {columns}x{rows} grid)")
        return status
    except (ManifestError, ContactSheetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
