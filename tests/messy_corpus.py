"""A folder of class folders as messy as photos collected from the web and phones: every colour
model and depth, animations, EXIF orientations, images too small for a reader's crop, broken files.
Each file says what must become of it, so a test can check every source's fate."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from tests import broken_images as bi

RECORD = "record"  # a readable image: a record for every profile
TOO_SMALL = "too small"  # a shorter side of 1 px: a dead letter naming image.min_side where a profile sets it
BROKEN = "broken"  # a dead letter for every profile

_FILES: dict[str, tuple[Callable[[], bytes], str]] = {
    "cmyk.jpg": (lambda: bi.image_bytes("JPEG", "CMYK", (120, 90)), RECORD),
    "ycck.jpg": (bi.ycck_jpeg, RECORD),
    "grey.jpg": (lambda: bi.image_bytes("JPEG", "L", (90, 120)), RECORD),
    "progressive.jpg": (lambda: bi.image_bytes("JPEG", "RGB", (200, 150), progressive=True), RECORD),
    "camera.jpg": (bi.mpo, RECORD),  # an MPO, as phone cameras write them
    "deep16.png": (lambda: bi.image_bytes("PNG", "I;16"), RECORD),
    "deep16_rgba.png": (lambda: bi.crafted_png(6, 16), RECORD),
    "palette_transparent.png": (lambda: bi.image_bytes("PNG", "P", transparency=3), RECORD),
    "rgba.png": (lambda: bi.image_bytes("PNG", "RGBA"), RECORD),
    "interlaced.png": (lambda: bi.crafted_png(2, 8, interlace=True), RECORD),
    "animated.png": (lambda: bi.animated_bytes("PNG"), RECORD),
    "animated.gif": (lambda: bi.animated_bytes("GIF", "P"), RECORD),
    "still.gif": (lambda: bi.image_bytes("GIF", "P", transparency=3), RECORD),
    "animated.webp": (lambda: bi.animated_bytes("WEBP"), RECORD),
    "still.webp": (lambda: bi.image_bytes("WEBP", "RGB"), RECORD),
    "alpha.webp": (lambda: bi.image_bytes("WEBP", "RGBA", lossless=True), RECORD),
    "bgr.bmp": (lambda: bi.image_bytes("BMP", "RGB"), RECORD),
    "bgra.bmp": (lambda: bi.image_bytes("BMP", "RGBA"), RECORD),
    "scan.tif": (lambda: bi.image_bytes("TIFF", "CMYK"), RECORD),
    "rotated.png": (lambda: bi.exif_oriented(6, "PNG"), RECORD),
    **{f"exif_{o}.jpg": (lambda o=o: bi.exif_oriented(o), RECORD) for o in range(2, 9)},
    "two_by_two.jpg": (lambda: bi.image_bytes("JPEG", "RGB", (2, 2)), RECORD),
    "one_by_one.png": (lambda: bi.image_bytes("PNG", "RGB", (1, 1)), TOO_SMALL),
    "one_by_one.jpg": (lambda: bi.image_bytes("JPEG", "RGB", (1, 1)), TOO_SMALL),
    "strip.gif": (lambda: bi.image_bytes("GIF", "P", (1, 40)), TOO_SMALL),
    "empty.jpg": (bi.zero_bytes, BROKEN),
    "truncated.jpg": (bi.truncated_jpeg, BROKEN),
    "no_end_marker.jpg": (bi.jpeg_without_end_marker, BROKEN),
    "corrupt.jpg": (bi.corrupt_jpeg, BROKEN),
    "error_page.jpg": (bi.html_page, BROKEN),
    "truncated.png": (bi.truncated_png, BROKEN),
    "bad_crc.png": (bi.png_with_bad_crc, BROKEN),
    "corrupt.png": (bi.corrupt_png, BROKEN),
}
LABELS = ("cats", "dogs")


def write_corpus(root: pathlib.Path) -> dict[str, str]:
    """Writes the corpus below `root` (the files alternating between the class folders) and returns
    each file's fate by its path below root."""
    fates = {}
    for i, (name, (make, fate)) in enumerate(sorted(_FILES.items())):
        path = root / LABELS[i % len(LABELS)] / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make())
        fates[path.relative_to(root).as_posix()] = fate
    return fates
