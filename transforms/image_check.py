"""Which source files become records, and what each record stores as its image.

Readers decode `image/encoded` with TensorFlow's `tf.io.decode_image` and trust the height, width
and channels stored beside it, but the workers that write records have no TensorFlow. So this
module carries what TF 2.21 was measured to decode (the table below; tests/transforms/
test_image_check.py checks every row against a real decode): such files are stored byte for byte,
anything else Pillow reads is re-encoded. Sizes come from headers, so an absurd size is refused
before any pixel is decoded, and truncated or corrupt data is caught here as cheaply as each
format allows. A reason describes the file (its kind and size, offsets, counts) and never quotes
it: a source may be any file a link or an image CSV's row names (/etc/passwd), and reasons land in
the error report, the logs and `inspect`. So Pillow's messages are shown only where they are known
to hold nothing of the file (plugins put header bytes and header text in theirs).

What `tf.io.decode_image(data, expand_animations=False)` makes of what Pillow opens:

JPEG, MPO  Huffman-coded DCT (SOF0-2: baseline, extended, progressive) in any colour space:
           grey -> 1 channel; YCbCr, RGB, CMYK and YCCK -> 3 (TF converts CMYK itself, as Pillow
           does when there is an Adobe marker, which CMYK JPEGs carry). MPO: the first image.
           EXIF orientation is ignored (in every format), so the stored size is the unrotated one. Lossless (SOF3)
           fails; arithmetic-coded and hierarchical ones are not trusted. TF also fails where
           Pillow does not: no end-of-image marker, or a segment running past the end.
PNG        Anything libpng reads: 1-16 bits, interlaced, APNG (its default image). Channels follow
           the IHDR colour type, not Pillow's mode (Pillow opens 16-bit grey+alpha as RGBA):
           grey 1, grey+alpha 2, RGB 3, RGBA 4, palette 3, or 4 with a tRNS chunk (tRNS on grey or
           RGB is ignored). TF also fails on a bad CRC anywhere, or a damaged IEND.
GIF        Frame 0 as 3 channels, but sized by the largest frame rather than the canvas, and it
           fails without a colour map or on an index past its end: stored as is only when
           neither can happen.
BMP        TF reads bpp/8 bytes per pixel whatever the compression or palette say, and wants the
           file to end exactly after the last row: 24-bit -> 3; 32-bit -> 4 (the 4th byte is
           taken as alpha even where the file calls it padding); 8-bit -> 1, right only when the
           palette is the grey ramp (Pillow's mode L). 1/4/16-bit, RLE, OS/2 headers, masks other
           than BGRA, trailing bytes: they fail or come out wrong.
WebP       Still: 3 channels, or 4 with alpha. Animated WebP corrupts TF 2.21's heap (the process
           aborts), so it is re-encoded.
Others     TIFF, JPEG 2000, ICO, PPM, TGA, AVIF, ...: unknown to TF, re-encoded.

EXIF orientation: TF decodes the stored pixels, where a photo viewer turns or mirrors them as the
EXIF orientation tag says (phone photos held sideways). `orientation` reports what a record keeps
of it; `Encoding.upright` re-encodes such sources turned as a viewer shows them instead (lossy
JPEGs to JPEG again, the rest to PNG). It is read once the pixels are loaded: Pillow turns a TIFF
as it loads it and drops the tag, so a TIFF reports none.

Re-encoding keeps what the source has: lossy JPEGs become RGB (or grey) JPEG (quality 95 unless
configured); all else becomes PNG, keeping grey, alpha, palettes and 16-bit depth. It keeps the
first frame only, as decode_image(expand_animations=False) reads one stored as is (animated GIF,
WebP, PNG; multi-page TIFF): `frames` says how many the source had, for the run to report.

`Encoding.jpeg_only`, for readers that decode nothing but JPEG (`tf.image.decode_and_crop_jpeg` in
the TPU reference ResNet): JPEGs TF decodes are still stored byte for byte (grey ones included,
since those readers decode with channels=3), and every other source becomes an RGB JPEG, as
tensorflow/tpu's imagenet_to_gcs.py does for its PNG and CMYK files. Transparency is composited
on white (what a viewer shows; transparent pixels often hide black or junk) or dropped (what
imagenet_to_gcs.py's decode_png(channels=3) does).

`Encoding.resize` (transforms.image_resize), for models that train on a known input size: a source
larger than its bound is stored scaled down to it as JPEG (grey or RGB, transparency as `alpha`
says), turned as its EXIF orientation says first, and its record keeps its full size beside the
stored one (`original_width`, `original_height`). It is checked as every source is, and judged by
its full size: max_pixels and the decompression-bomb refusal before any pixel is decoded, the
damage checks on the decode the scaling uses (a JPEG's at a reduced DCT scale). A source within
the bound is stored as it would be without it, its own bytes where TF decodes them.

`Encoding.min_side`, for readers whose crop keeps a fraction of the shorter side, rounded down (the
TPU reference ResNet's and Model Garden's center crops keep 7/8 of it): a source whose shorter side,
as stored, is below it is refused, its reason naming the sizes and the setting, since that reader's
crop of it would be empty and fail the reader mid-epoch. Turning by EXIF orientation does not
change it.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import io
import logging
import re
import struct
import traceback

from PIL import Image, ImageOps, UnidentifiedImageError

from transforms.image_resize import Resize, draft_size, scaled

_LOG = logging.getLogger(__name__)

DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's decompression-bomb threshold: ~9.5k x 9.5k
JPEG_QUALITY = 95  # a JPEG written in place of a source readers cannot decode stands in for the original
RESIZED_JPEG_QUALITY = 90  # images scaled down to the size a model trains on: FFCV's default for its stored images
# TF fails JPEGs of 2**29 decoded bytes or more (4 per pixel for CMYK), PNGs of 2**29 pixels, BMPs of 2**28.
_TF_MAX_PIXELS = (1 << 27) - 1
# What Pillow raises on malformed data (Image.open itself treats the last four as "not this format").
_DATA_ERRORS = (OSError, ValueError, EOFError, SyntaxError, IndexError, TypeError, KeyError, struct.error)
_BOMB = (Image.DecompressionBombError, Image.DecompressionBombWarning)  # the warning raises under -W error
_PILLOW_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")  # Pillow's message: "Image size (N pixels) exceeds ..."
_REFUSED_FORMATS = {"EPS"}  # rendering it means running Ghostscript on untrusted input
_SIGNATURES = (
    (0, b"\xff\xd8\xff", "a JPEG"),
    (0, b"\x89PNG\r\n\x1a\n", "a PNG"),
    (0, b"GIF8", "a GIF"),
    (8, b"WEBP", "a WebP"),
)
# What else a file under an image name often is (_described), by its first bytes.
_OTHER_SIGNATURES = (
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"PK\x05\x06", "a ZIP archive"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\x7fELF", "an ELF executable"),
)
_TEXT_SAMPLE = 1024  # bytes that decide whether a file is text
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")  # in text: only tab, line ends and form feed
# Pillow's messages known to hold nothing of the file (_pillow_says): shown as they are, or in
# the words given where Pillow quotes the file in them.
_PILLOW_MESSAGES = tuple(
    (re.compile(message), words)
    for message, words in (
        (r"image file is truncated( \(\d+ bytes not processed\))?", None),
        (r"Truncated File Read|truncated PNG file|not enough image data|failed to read next frame", None),
        (r"(broken data stream|unrecognized data stream contents|buffer overrun) when reading image file", None),
        (r"codec configuration error when reading image file|could not create decoder object", None),
        (r"(de|en)coder error -?\d+|Incomplete header: \d+ bytes|Expected to read \d+ bytes but only got \d+\.", None),
        (r"broken PNG file \((bad|incomplete) header checksum in .*\)", "broken PNG file (a bad chunk checksum)"),
        (r"broken PNG file \(chunk .*\)", "broken PNG file (a chunk is malformed)"),
    )
)

_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_JPEG_TF_PROCESSES = {0xC0, 0xC1, 0xC2}  # Huffman-coded DCT: baseline, extended, progressive
_JPEG_LOSSLESS = {0xC3, 0xC7, 0xCB, 0xCF}
# A marker in entropy-coded data: there FF is only followed by 00 (stuffing) or D0-D7 (restarts).
_JPEG_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the whole IEND chunk
_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # by IHDR colour type; palette (3) depends on tRNS
_BMP_BGR_MASKS = struct.pack("<III", 0xFF0000, 0xFF00, 0xFF)

# Re-encoding as PNG: Pillow mode -> mode saved, and the channels TF decodes from that mode.
_PNG_MODES = {
    "1": "1",
    "L": "L",
    "LA": "LA",
    "La": "LA",
    "P": "P",
    "PA": "RGBA",
    "RGB": "RGB",
    "RGBA": "RGBA",
    "RGBa": "RGBA",
    "RGBX": "RGB",
    "CMYK": "RGB",
    "YCbCr": "RGB",
    "LAB": "RGB",
    "HSV": "RGB",
    "I;16": "I;16",
    "I;16L": "I;16",
    "I;16B": "I;16",
    "I;16N": "I;16",
    "I": "I;16",
}
_PNG_MODE_CHANNELS = {"1": 1, "L": 1, "I;16": 1, "LA": 2, "RGB": 3, "RGBA": 4}  # P: 3, or 4 with tRNS
_DEEP_GREY = {"I", "I;16", "I;16L", "I;16B", "I;16N"}  # 16/32-bit grey: scaled to 8 bits for JPEG
ALPHA_MODES = ("composite", "drop")  # what jpeg_only does with transparency (Encoding.alpha)


class BadImage(Exception):
    """A source that must become a dead letter."""

    def __init__(self, stage: str, reason: str):
        super().__init__(f"{stage}: {reason}")
        self.stage = stage  # "read", "identify", "dimensions", "decode" or "convert"
        self.reason = reason


class _Damaged(Exception):
    """Damage this module's own checks find, in their own words (offsets and counts, never bytes)."""


@dataclasses.dataclass(frozen=True)
class CheckedImage:
    """What a record stores for one source image."""

    data: bytes  # what to store in image/encoded: the source's own bytes, or a re-encoding
    format: str  # as stored: "jpeg", "png", "gif", "bmp" or "webp"
    height: int
    width: int
    channels: int  # exactly what tf.io.decode_image(data, expand_animations=False) returns
    converted: bool  # True when data is a re-encoding
    frames: int = 1  # of a re-encoded source, which data holds the first of (1 for one stored as is)
    orientation: int = 1  # the source's EXIF orientation (2-8), not applied to data (TF ignores it); 1: none or applied
    # the source's full size, turned as data is: what a resized image was scaled down from (Encoding.resize)
    original_height: int | None = None  # None: height
    original_width: int | None = None  # None: width


@dataclasses.dataclass(frozen=True)
class Encoding:
    """What the run's readers need of every record (config `image.*`): how images that are not
    stored byte for byte are encoded, and the smallest side their crops take."""

    jpeg_only: bool = False  # every source that is not a JPEG TF decodes becomes an RGB JPEG
    jpeg_quality: int | None = None  # of every JPEG written here; None: default_jpeg_quality(resize)
    alpha: str = "composite"  # jpeg_only: transparency composited on white, or dropped
    upright: bool = False  # sources with an EXIF orientation re-encoded as a viewer shows them
    min_side: int = 1  # sources stored with a shorter side below it refused: a reader's crop of them would be empty
    resize: Resize = Resize()  # sources larger than its bound stored scaled down to it, as JPEG

    def __post_init__(self):
        if self.jpeg_quality is None:
            object.__setattr__(self, "jpeg_quality", default_jpeg_quality(self.resize))
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality={self.jpeg_quality} is not in 1..100")
        if self.min_side < 1:
            raise ValueError(f"min_side={self.min_side} is not >= 1")
        if self.alpha not in ALPHA_MODES:
            raise ValueError(f"alpha={self.alpha!r} is not one of {ALPHA_MODES}")
        bound = self.resize.shorter_side or self.resize.longer_side
        if bound is not None and bound < self.min_side:
            raise ValueError(
                f"resize to {bound} px would store every larger source with a side below min_side ({self.min_side} px)"
            )


def default_jpeg_quality(resize: Resize) -> int:
    """The quality of the JPEGs a run writes where its settings name none. A resized dataset is a
    training copy at the model's size, decoded again every epoch: FFCV's quality, whose smaller
    files decode faster. Anything else is written at a quality that stands in for the original."""
    return RESIZED_JPEG_QUALITY if resize.enabled else JPEG_QUALITY


def max_pixels_limit() -> int:
    """The largest `max_pixels` check_image accepts: what both Pillow's bomb guard
    (Image.MAX_IMAGE_PIXELS, which runs first) and TensorFlow allow."""
    return min(Image.MAX_IMAGE_PIXELS or _TF_MAX_PIXELS, _TF_MAX_PIXELS)


def check_image(data: bytes, max_pixels: int, encoding: Encoding = Encoding()) -> CheckedImage:
    """The image a record stores for one source file's bytes, or BadImage saying why there is none.

    Raises ValueError if max_pixels is above max_pixels_limit(): that is a configuration error,
    not a bad file.
    """
    limit = max_pixels_limit()
    if max_pixels > limit:
        raise ValueError(f"max_pixels={max_pixels:,} is above {limit:,}, the most Pillow and TensorFlow accept")
    try:
        return _check(data, max_pixels, encoding)
    except _BOMB as e:  # Pillow's own guard, which can fire before our check sees the size
        raise BadImage("dimensions", _bomb_reason(e, max_pixels)) from e


def _check(data: bytes, max_pixels: int, encoding: Encoding) -> CheckedImage:
    if not data:
        raise BadImage("read", "empty file (0 bytes)")
    im = _open(data)
    width, height = im.size
    if width < 1 or height < 1 or width * height > max_pixels:
        raise BadImage("dimensions", f"{width}x{height} is {width * height:,} pixels; the limit is {max_pixels:,}")
    target = encoding.resize.target(width, height)
    stored_width, stored_height = target or (width, height)
    if min(stored_width, stored_height) < encoding.min_side:
        stored = f" stored at {stored_width}x{stored_height} (image.resize)" if target else ""
        raise BadImage(
            "dimensions",
            f"{width}x{height}{stored}: its shorter side, {min(stored_width, stored_height)} px, is below "
            f"{encoding.min_side} px, the smallest the reader's crop takes (image.min_side)",
        )
    with _pillow_errors("decode", f"bad {im.format} data"):
        channels = _NATIVE.get(im.format, _load)(im, data, target)
    orientation = _orientation(im)
    is_jpeg = im.format in ("JPEG", "MPO")
    if target is not None:
        return _reencode(im, _lossy(is_jpeg, data), encoding, orientation, _turned((width, height), im, orientation))
    if orientation != 1 and encoding.upright:  # reopened: a JPEG was loaded at 1/8 scale
        return _reencode(_open(data), _lossy(is_jpeg, data), encoding, orientation)
    if channels and (is_jpeg or not encoding.jpeg_only):
        fmt = "jpeg" if is_jpeg else im.format.lower()
        return CheckedImage(data, fmt, height, width, channels, False, orientation=orientation)
    return dataclasses.replace(_reencode(im, _lossy(is_jpeg, data), encoding), orientation=orientation)


def _turned(size: tuple[int, int], loaded: Image.Image, orientation: int) -> tuple[int, int]:
    """The source's full (width, height) as it will be stored: turned a quarter where its EXIF
    orientation says so (5-8), or where the loader turned it already (Pillow's TIFF loader applies
    the tag and drops it: it then holds the full size, never drafted)."""
    width, height = size
    if loaded.size == (height, width) != size or orientation in (5, 6, 7, 8):
        return height, width
    return size


def _lossy(is_jpeg: bool, data: bytes) -> bool:
    return is_jpeg and _jpeg_frame(data)[0] not in _JPEG_LOSSLESS


def _orientation(im: Image.Image) -> int:
    """The EXIF orientation tag, 2-8; 1 when there is none, it says upright, or the EXIF does not
    parse (TF ignores EXIF, so it is no reason to refuse an image)."""
    try:
        orientation = im.getexif().get(0x0112, 1)
    except _DATA_ERRORS:
        return 1
    return orientation if orientation in range(2, 9) else 1


def _bomb_reason(error: Exception, max_pixels: int) -> str:
    """The dead letter's reason for Pillow's decompression-bomb error (or warning, raised under
    -W error): the image's pixel count and the configured limit, not Pillow's own limit (which is
    above max_pixels, so the image is over both)."""
    found = _PILLOW_BOMB_PIXELS.search(str(error))
    if found is None:  # another Pillow wording (not shown: _pillow_says): still name the configured limit
        return f"more pixels than Pillow opens; the limit is {max_pixels:,}"
    return f"{int(found[1]):,} pixels; the limit is {max_pixels:,}"


def _open(data: bytes) -> Image.Image:
    """Pillow's lazy open, which reads the header only."""
    with _pillow_errors("decode", "unreadable header"):  # a plugin claimed the file, then choked
        try:
            im = Image.open(io.BytesIO(data))
        except UnidentifiedImageError:
            raise BadImage(*_unidentified(data)) from None
    if im.format in _REFUSED_FORMATS:
        raise BadImage("identify", f"{im.format} files are not accepted")
    return im


def _unidentified(data: bytes) -> tuple[str, str]:
    """(stage, reason) for bytes Pillow does not recognise: with an image signature they are a
    broken image; otherwise say what they look like (error pages saved as .jpg are common)."""
    for offset, signature, name in _SIGNATURES:
        if data.startswith(signature, offset):
            return "decode", f"starts like {name} but its header is truncated or corrupt ({len(data):,} bytes)"
    return "identify", f"not an image: {_described(data)}"


def _described(data: bytes) -> str:
    """What a file that is not an image holds, by its kind and size."""
    for signature, kind in _OTHER_SIGNATURES:
        if data.startswith(signature):
            return f"{kind} ({len(data):,} bytes)"
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data[:_TEXT_SAMPLE])  # a cut last character is fine
    except UnicodeDecodeError:
        text = None
    if text is None or _CONTROL.search(text):
        return f"binary data of an unknown kind ({len(data):,} bytes)"
    if text.lstrip("\ufeff \t\r\n").startswith("<"):
        return f"{len(data):,} bytes of HTML/XML (a web page saved under an image name?)"
    return f"{len(data):,} bytes of text"


@contextlib.contextmanager
def _pillow_errors(stage: str, what: str):
    """Turn what Pillow raises on bad data into BadImage(stage, "what: why"), in words that never
    quote the file (_pillow_says). Anything else is logged with its traceback but not its message,
    being maybe a bug rather than bad data, but still only costs its file: a worker must not die on
    one file."""
    try:
        yield
    except (BadImage, MemoryError, *_BOMB):  # bombs: check_image says what the limit is
        raise
    except _Damaged as e:
        raise BadImage(stage, f"{what}: {e}") from e
    except _DATA_ERRORS as e:
        raise BadImage(stage, f"{what}: {_pillow_says(e)}") from e
    except Exception as e:
        trace = "".join(traceback.format_tb(e.__traceback__))
        _LOG.error("unexpected %s while checking an image (%s):\n%s", type(e).__name__, what, trace)
        raise BadImage(stage, f"{what}: unexpected {type(e).__name__}") from e


def _pillow_says(error: Exception) -> str:
    """Pillow's message where it is one known to hold nothing of the file but numbers, the words
    given for one known to quote it (a PNG chunk's type), else only the error's type: plugins put
    header bytes and header text in their messages (a TIFF header, an IM header line)."""
    message = str(error)
    for known, words in _PILLOW_MESSAGES:
        if known.fullmatch(message):
            return words or message
    return f"{type(error).__name__} from Pillow"


# Per format: load the pixels (enough of them to catch truncation) and return the channels TF
# decodes from the file as it is, or None when it must be re-encoded.


def _load(im: Image.Image, data: bytes, target: tuple[int, int] | None) -> None:
    im.load()


def _jpeg(im: Image.Image, data: bytes, target: tuple[int, int] | None) -> int | None:
    process, frame = _jpeg_frame(data)
    if process not in _JPEG_TF_PROCESSES or im.mode not in ("L", "RGB", "CMYK"):
        im.load()
        return None
    # Decoding at 1/8 scale (or, for a source stored resized, the coarsest scale that keeps what
    # its scaling needs: transforms.image_resize) still reads every byte of entropy-coded data, so
    # truncation shows... (Only for these processes: scaling a lossless JPEG corrupts Pillow 12's heap.)
    im.draft(im.mode, drafted_size(im.size, target))
    im.load()
    # ... but Pillow forgives a missing end marker, and a segment running past the end of the file
    # (such as a corrupt byte reading as a marker); TF does not.
    pos = frame
    while match := _JPEG_MARKER.search(data, pos):
        pos = match.start()
        if data[pos + 1] == 0xD9:
            return 1 if im.mode == "L" else 3
        if pos + 4 > len(data) or (end := pos + 2 + (data[pos + 2] << 8 | data[pos + 3])) > len(data):
            raise _Damaged(f"segment 0x{data[pos + 1]:02X} at byte {pos} runs past the end of the file")
        pos = end
    raise _Damaged("no end-of-image marker (truncated?)")


def drafted_size(size: tuple[int, int], target: tuple[int, int] | None) -> tuple[int, int]:
    """What a JPEG of `size` is decoded at (Pillow's `draft`): the coarsest DCT scale, 1/8, to check
    it, or, stored scaled down to `target`, the scale its scaling needs (transforms.image_resize)."""
    return draft_size(target) if target else (max(1, size[0] // 8), max(1, size[1] // 8))


def _jpeg_frame(data: bytes) -> tuple[int | None, int]:
    """(SOFn marker, offset) of the first frame header, the marker naming the coding process;
    (None, 0) if the markers before it don't parse."""
    pos = 2
    try:
        while True:
            if data[pos] != 0xFF or data[pos + 1] == 0xFF:  # junk or fill bytes, skipped as libjpeg does
                pos += 1
            elif data[pos + 1] in _JPEG_SOF:
                return data[pos + 1], pos
            else:
                pos += 2 + (data[pos + 2] << 8 | data[pos + 3])
    except IndexError:
        return None, 0


def _png(im: Image.Image, data: bytes, target: tuple[int, int] | None) -> int | None:
    # verify() checks the CRC of every chunk up to IEND, as libpng does, without decoding; the
    # full load then proves the zlib stream, which CRCs don't cover (and costs far more).
    Image.open(io.BytesIO(data)).verify()
    if not data.endswith(_PNG_END) and _PNG_END not in data:
        raise _Damaged("no intact IEND chunk (truncated?)")
    im.load()
    if data[12:16] != b"IHDR":
        return None
    if data[25] == 3:  # palette
        return 4 if "transparency" in im.info else 3
    return _PNG_CHANNELS.get(data[25])


def _gif(im: Image.Image, data: bytes, target: tuple[int, int] | None) -> int | None:
    im.load()
    frames = _gif_frames(data)
    if not frames or any(colours is None for _, _, colours in frames):
        return None
    if (max(w for w, _, _ in frames), max(h for _, h, _ in frames)) != im.size:
        return None
    if im.mode != "P" or im.getextrema()[1] >= frames[0][2]:
        return None
    return 3


def _gif_frames(data: bytes) -> list[tuple[int, int, int | None]]:
    """(width, height, colour map size or None) of each frame, walking the blocks as giflib does."""
    global_colours = 2 << (data[10] & 7) if data[10] & 0x80 else None
    pos = 13 + 3 * (global_colours or 0)
    frames = []
    try:
        while pos < len(data) and data[pos] != 0x3B:  # 0x3B: trailer (giflib does without)
            if data[pos] == 0x21:  # extension: label, then sub-blocks
                pos = _skip_sub_blocks(data, pos + 2)
            elif data[pos] == 0x2C:  # image: descriptor, local colour map, LZW code size, sub-blocks
                width, height, flags = struct.unpack_from("<HHB", data, pos + 5)
                local_colours = 2 << (flags & 7) if flags & 0x80 else None
                pos = _skip_sub_blocks(data, pos + 11 + 3 * (local_colours or 0))
                frames.append((width, height, local_colours or global_colours))
            else:
                raise _Damaged(f"unknown GIF block 0x{data[pos]:02X} at byte {pos}")
    except (IndexError, struct.error):
        raise _Damaged(f"truncated GIF: the file ends after {len(frames)} complete frame(s)") from None
    return frames


def _skip_sub_blocks(data: bytes, pos: int) -> int:
    while data[pos]:
        pos += data[pos] + 1
    return pos + 1


def _bmp(im: Image.Image, data: bytes, target: tuple[int, int] | None) -> int | None:
    im.load()
    if int.from_bytes(data[14:18], "little") < 40:  # OS/2 headers put the fields elsewhere
        return None
    offset, width, height, bpp, compression = struct.unpack_from("<I4xii2xHI", data, 10)
    if len(data) != offset + (bpp // 8 * width + 3) // 4 * 4 * abs(height):
        return None
    if bpp == 24 and compression == 0:
        return 3
    if bpp == 32 and (compression == 0 or compression == 3 and data[54:66] == _BMP_BGR_MASKS):
        return 4
    if bpp == 8 and compression == 0 and im.mode == "L":
        return 1
    return None


def _webp(im: Image.Image, data: bytes, target: tuple[int, int] | None) -> int | None:
    im.load()
    if data[12:16] == b"VP8X" and data[20] & 0x02:  # the animation flag
        return None
    return 4 if im.mode == "RGBA" else 3


_NATIVE = {"JPEG": _jpeg, "MPO": _jpeg, "PNG": _png, "GIF": _gif, "BMP": _bmp, "WEBP": _webp}


def _reencode(
    im: Image.Image, lossy: bool, encoding: Encoding, orientation: int = 1, full_size: tuple[int, int] | None = None
) -> CheckedImage:
    """JPEG for lossy JPEG sources (lossy already), for sources scaled down and, with jpeg_only,
    for all others (as RGB); else lossless PNG. Turned as EXIF `orientation` says, if not 1, then
    scaled down as `encoding.resize` bounds a source of `full_size` (its full size, turned: `im`
    may be a JPEG decoded at a reduced scale)."""
    source = im
    target = encoding.resize.target(*full_size) if full_size else None
    with _pillow_errors("convert", f"cannot re-encode {im.format} {im.mode}"):
        # Pixels no PNG holds whole are refused, not clipped into a JPEG either
        mode = _PNG_MODES.get(im.mode)
        if mode is None:
            raise BadImage("convert", f"Pillow mode {im.mode} has no lossless PNG form")
        if im.mode == "I" and not 0 <= im.getextrema()[0] <= im.getextrema()[1] <= 0xFFFF:
            raise BadImage("convert", "32-bit pixel values outside 0..65535 have no lossless PNG form")
        if orientation != 1:
            im = ImageOps.exif_transpose(im)
        if lossy or encoding.jpeg_only or target:
            out = im if (lossy or target) and im.mode in ("L", "RGB") else _rgb(im, encoding.alpha)
            if target:
                out = scaled(out, target)
            fmt, options, channels = "JPEG", {"quality": encoding.jpeg_quality}, 1 if out.mode == "L" else 3
        else:
            out = im if mode == im.mode else im.convert(mode)
            # zlib level 4 makes photos within 1% of the default level 6's size, in 60% of the time.
            fmt, options = "PNG", {"compress_level": 4}
            channels = _PNG_MODE_CHANNELS.get(mode) or (4 if "transparency" in out.info else 3)
        buffer = io.BytesIO()
        out.save(buffer, fmt, **options)
    with _pillow_errors("decode", f"bad {source.format} data"):  # counting frames reads past the first
        # An MPO's further images are other views or previews of its first (many camera JPEGs are MPO)
        frames = 1 if source.format == "MPO" else getattr(source, "n_frames", 1)
    original_width, original_height = full_size or (None, None)
    return CheckedImage(
        buffer.getvalue(),
        fmt.lower(),
        out.height,
        out.width,
        channels,
        True,
        frames,
        1,
        original_height,
        original_width,
    )


def _rgb(im: Image.Image, alpha: str) -> Image.Image:
    """`im` as 8-bit RGB: deep grey scaled down (as TF's decode_png does), transparency
    composited on white or dropped."""
    if im.mode in _DEEP_GREY:
        im = im.convert("I").point(lambda v: v / 256).convert("L")
    if im.mode in ("RGBa", "La"):  # premultiplied alpha
        im = im.convert(im.mode.upper())
    if im.mode not in ("RGBA", "LA", "PA") and "transparency" not in im.info:
        return im if im.mode == "RGB" else im.convert("RGB")
    rgba = im.convert("RGBA")
    if alpha == "drop":
        return rgba.convert("RGB")
    return Image.alpha_composite(Image.new("RGBA", im.size, "white"), rgba).convert("RGB")
