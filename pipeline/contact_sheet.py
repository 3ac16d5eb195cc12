"""`inspect --contact_sheet`: a grid of sample images, each captioned with its label and
dimensions (as stored, and where stored resized, the original's: `53x40 jpeg of 120x90`), so a
person can see at a glance that the labels match the pictures."""

from __future__ import annotations

import io
import logging
import math

from PIL import Image, ImageDraw, ImageFont

from core import storage
from core.contract.features import parse_spec
from core.contract.layout import join
from core.contract.manifest import Manifest
from pipeline.shard_records import read_shard
from pipeline.tfrecord_reader import RecordError
from pipeline.verify import import_tensorflow, rows_of

_LOG = logging.getLogger(__name__)

# Every tile is TILE_WIDTH x TILE_HEIGHT (image area + caption), tiles laid out in grid_shape(n)
# with no margins, so the sheet's size tells how many slots it has.
THUMBNAIL = 160
CAPTION_HEIGHT = 34
CAPTION_CHARS = 26  # of a caption line that fit the tile
TILE_WIDTH, TILE_HEIGHT = THUMBNAIL, THUMBNAIL + CAPTION_HEIGHT
SHEET_BACKGROUND = (255, 255, 255)
TILE_BACKGROUND = (32, 32, 32)


class ContactSheetError(ValueError):
    """The dataset has nothing to show (not an image dataset, or no records)."""


def grid_shape(n: int) -> tuple[int, int]:
    """(columns, rows) of a contact sheet of n tiles: as square as possible."""
    columns = max(1, math.ceil(math.sqrt(n)))
    return columns, max(1, math.ceil(n / columns))


def sample_images(dest: str, manifest: Manifest, n: int) -> list[dict]:
    """The first n records (shards are written in random order, so these are a random sample)
    of the splits in manifest order, decoded: {image (uint8 HxWxC numpy), label, width, ...}."""
    tf = import_tensorflow()
    keys = manifest.image_keys
    roles = ("encoded", "label", "filename", "format", "original_width", "original_height")
    shown = [keys[role] for role in roles if keys.get(role) in manifest.features]
    spec = parse_spec([manifest.features[key] for key in shown], tf, fill_missing=True)
    samples = []
    for split in manifest.splits.values():
        for shard in split.shards:
            for record, data in _records(join(dest, shard), dest, manifest):
                row = rows_of(tf.io.parse_example([data], spec), 1)[0]
                image = tf.io.decode_image(row[keys["encoded"]], channels=3, expand_animations=False).numpy()
                label_id = int(row[keys["label"]]) - manifest.label_offset if keys.get("label") in row else None
                samples.append(
                    {
                        "image": image,
                        "label_id": label_id,
                        "split": split.name,
                        "shard": shard,
                        "record": record,
                        "label": manifest.label_map[label_id]
                        if label_id is not None and 0 <= label_id < len(manifest.label_map)
                        else "?",
                        "height": image.shape[0],
                        "width": image.shape[1],
                        "format": row.get(keys.get("format"), b"").decode("utf-8", "replace"),
                        **{
                            role: int(row[keys[role]])
                            for role in ("original_width", "original_height")
                            if keys.get(role) in row
                        },
                    }
                )
                if len(samples) >= n:
                    return samples
    return samples


def _records(path: str, dest: str, manifest: Manifest):
    """(number, payload) of each record of a shard; a shard that breaks is a ContactSheetError
    naming it (inspect says so in one line)."""
    try:
        yield from enumerate(
            data for _, data in read_shard(path, manifest.compression, manifest.file_format, inside=dest)
        )
    except RecordError as e:
        raise ContactSheetError(f"{path}: record {e.record}: {e.message}") from e


def contact_sheet(samples: list[dict]):
    """A PIL image: one TILE_WIDTH x TILE_HEIGHT tile per sample (thumbnail over a caption with
    'id class' and 'WxH format'), grid_shape(len(samples)) tiles, unused slots left blank."""

    columns, rows = grid_shape(len(samples))
    sheet = Image.new("RGB", (columns * TILE_WIDTH, rows * TILE_HEIGHT), SHEET_BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    try:
        font = ImageFont.load_default(size=12)
    except TypeError:  # Pillow without FreeType sizes
        font = ImageFont.load_default()
    for i, sample in enumerate(samples):
        x, y = (i % columns) * TILE_WIDTH, (i // columns) * TILE_HEIGHT
        draw.rectangle([x + 1, y + 1, x + TILE_WIDTH - 2, y + TILE_HEIGHT - 2], fill=TILE_BACKGROUND)
        thumbnail = Image.fromarray(sample["image"]).convert("RGB")
        scale = (THUMBNAIL - 8) / max(thumbnail.width, thumbnail.height)  # small images are enlarged too
        thumbnail = thumbnail.resize(
            (max(1, round(thumbnail.width * scale)), max(1, round(thumbnail.height * scale))),
            Image.Resampling.LANCZOS if scale < 1 else Image.Resampling.NEAREST,
        )
        sheet.paste(thumbnail, (x + (TILE_WIDTH - thumbnail.width) // 2, y + (THUMBNAIL - thumbnail.height) // 2))
        label = f"{sample['label_id']} {sample['label']}" if sample["label_id"] is not None else "(no label)"
        draw.text((x + 4, y + THUMBNAIL + 2), label[:CAPTION_CHARS], fill=(255, 255, 255), font=font)
        draw.text((x + 4, y + THUMBNAIL + 17), size_caption(sample), fill=(190, 190, 190), font=font)
    return sheet


def size_caption(sample: dict) -> str:
    """`WxH format` of the stored image; where the record keeps an original size that differs (a
    dataset stored resized), `WxH format of WxH`, the format left out where the line would not fit."""
    stored = f"{sample['width']}x{sample['height']}"
    caption = f"{stored} {sample['format']}".strip()
    original = sample.get("original_width"), sample.get("original_height")
    if None not in original and original != (sample["width"], sample["height"]):
        of = f" of {original[0]}x{original[1]}"
        caption = caption + of if len(caption + of) <= CAPTION_CHARS else stored + of
    return caption[:CAPTION_CHARS]


def write_contact_sheet(dest: str, manifest: Manifest, path: str, n: int) -> int:
    """Write the PNG (local or gs://); returns the number of tiles."""
    if not manifest.is_image_dataset or "encoded" not in manifest.image_keys:
        raise ContactSheetError(f"a contact sheet needs an image dataset; this one is {manifest.kind!r}")
    samples = sample_images(dest, manifest, n)
    if len(samples) < n:
        _LOG.warning("the dataset has only %d record(s); the sheet shows them all", len(samples))
    if not samples:
        raise ContactSheetError("the dataset holds no records to show")
    buffer = io.BytesIO()
    contact_sheet(samples).save(buffer, format="PNG")
    storage.write_bytes(path, buffer.getvalue(), mime_type="image/png")
    return len(samples)
