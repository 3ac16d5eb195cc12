"""Bytes of image files for tests: broken ones that must become dead letters, and valid but awkward
ones (crafted byte by byte where Pillow cannot write them). Each function returns a file's bytes."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import numpy as np
from PIL import Image


def picture(mode: str = "RGB", size: tuple[int, int] = (64, 48)) -> Image.Image:
    """A photo-like picture (gradients, an edge, a little noise) in any Pillow mode; alpha varies."""
    width, height = size
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    noise = np.random.default_rng(0).integers(0, 24, (height, width, 3))
    disc = ((x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(size) / 3) ** 2)[..., None] * 80
    rgb = np.dstack([x / width * 200, y / height * 200, (x + y) / (width + height) * 150]) + noise + disc
    im = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    if mode == "P":
        return im.quantize(16)
    if mode in ("I;16", "I"):
        return Image.fromarray(np.asarray(im.convert("L")).astype(np.uint16) * 257).convert(mode)
    out = im.convert(mode)
    if mode in ("LA", "RGBA"):
        alpha = Image.fromarray(np.linspace(0, 255, width, dtype=np.uint8)[None, :].repeat(height, 0))
        out.putalpha(alpha)
    return out


def image_bytes(fmt: str, mode: str, size: tuple[int, int] = (64, 48), **save_kwargs) -> bytes:
    """picture(mode, size) saved by Pillow as fmt ("JPEG", "PNG", "TIFF", ...)."""
    buffer = io.BytesIO()
    picture(mode, size).save(buffer, fmt, **save_kwargs)
    return buffer.getvalue()


def animated_bytes(
    fmt: str, mode: str = "RGB", size: tuple[int, int] = (64, 48), frames: int = 3, **save_kwargs
) -> bytes:
    """An animation of picture(mode, size) then alternately mirrored and upside-down copies."""
    first = picture(mode, size)
    flips = (Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.ROTATE_180)
    rest = [first.transpose(flips[i % 2]) for i in range(frames - 1)]
    buffer = io.BytesIO()
    first.save(buffer, fmt, save_all=True, append_images=rest, duration=50, loop=0, **save_kwargs)
    return buffer.getvalue()


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def png_bytes(pixels: np.ndarray, bit_depth: int, colour_type: int, *, interlace: bool = False) -> bytes:
    """A PNG written byte by byte from (height, width, samples) pixels, for what Pillow cannot
    write: 16-bit RGB(A) and grey+alpha, Adam7 interlacing."""
    height, width = pixels.shape[:2]
    dtype = ">u2" if bit_depth == 16 else "u1"

    def rows(a):
        return b"".join(b"\x00" + a[y].astype(dtype).tobytes() for y in range(a.shape[0]))

    if interlace:
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b"".join(rows(pixels[y0::dy, x0::dx]) for x0, y0, dx, dy in passes if pixels[y0::dy, x0::dx].size)
    else:
        raw = rows(pixels)
    header = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, int(interlace))
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(raw))
        + png_chunk(b"IEND", b"")
    )


def bmp_bytes(
    width: int,
    height: int,
    bpp: int,
    pixels: bytes,
    *,
    compression: int = 0,
    palette: bytes = b"",
    masks: bytes = b"",
    header_size: int = 40,
    top_down: bool = False,
) -> bytes:
    """A BMP written byte by byte (pixels: rows as stored, padding included), for what Pillow
    cannot write: RLE, 16-bit, bit fields, top-down rows, V5 headers."""
    info = struct.pack(
        "<IiiHHIIiiII",
        header_size,
        width,
        -height if top_down else height,
        1,
        bpp,
        compression,
        len(pixels),
        2835,
        2835,
        len(palette) // 4,
        0,
    )
    info = (info + masks).ljust(header_size, b"\x00") if header_size > 40 else info + masks
    offset = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + palette + pixels


def bmp_rows(im: Image.Image) -> bytes:
    """im's pixels as BMP stores them: bottom-up rows of BGR(A) or grey bytes, padded to 4 bytes."""
    a = np.asarray(im)
    if a.ndim == 3:
        a = a[..., [2, 1, 0, 3][: a.shape[2]]]
    pad = b"\x00" * (-a[0].nbytes % 4)
    return b"".join(row.tobytes() + pad for row in a[::-1])


def crafted_png(colour_type: int, bit_depth: int = 8, interlace: bool = False) -> bytes:
    """picture() as a PNG of any colour type (0 grey, 2 RGB, 4 grey+alpha, 6 RGBA) and depth 8 or 16."""
    rgba = np.asarray(picture("RGBA")).astype(np.uint16) * (257 if bit_depth == 16 else 1)
    samples = {0: [0], 2: [0, 1, 2], 4: [0, 3], 6: [0, 1, 2, 3]}[colour_type]
    return png_bytes(rgba[..., samples], bit_depth, colour_type, interlace=interlace)


def tiff_with_a_lost_page() -> bytes:
    """A one-page TIFF whose IFD points to a next page past the end of the file."""
    data = bytearray(image_bytes("TIFF", "RGB"))
    (ifd,) = struct.unpack_from("<I", data, 4)  # little-endian, as Pillow writes it
    (entries,) = struct.unpack_from("<H", data, ifd)
    struct.pack_into("<I", data, ifd + 2 + 12 * entries, len(data) + 1000)
    return bytes(data)


def jpeg_relabelled(marker: int = 0xC9, jpeg: bytes | None = None) -> bytes:
    """A JPEG (by default a baseline RGB one) whose first frame header claims another coding
    process (0xC9: arithmetic-coded). libjpeg still decodes it, into noise, with warnings: a
    stand-in for the real thing, which Pillow cannot write."""
    data = bytearray(jpeg or image_bytes("JPEG", "RGB"))
    data[data.index(b"\xff\xc0") + 1] = marker
    return bytes(data)


def exif_oriented(orientation: int = 6, fmt: str = "JPEG") -> bytes:
    """A 64x48 picture whose EXIF orientation tag says how a viewer displays it (6: rotated 90
    degrees clockwise; 1: as stored; 9: no such orientation)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "Camera"
    return image_bytes(fmt, "RGB", exif=exif.tobytes())


def mpo() -> bytes:
    """A two-image MPO, as stereo and many phone cameras write them under a .jpg name."""
    buffer = io.BytesIO()
    first = picture()
    first.save(buffer, "MPO", save_all=True, append_images=[first.transpose(Image.Transpose.ROTATE_180)])
    return buffer.getvalue()


def bmp_top_down() -> bytes:
    """A 24-bit BMP stored top row first (negative height)."""
    im = picture()
    return bmp_bytes(im.width, im.height, 24, bmp_rows(im.transpose(Image.Transpose.FLIP_TOP_BOTTOM)), top_down=True)


def bmp_bitfields(order: str = "BGRA") -> bytes:
    """A 32-bit BMP with a V5 header and BI_BITFIELDS masks laying pixels out in `order` bytes."""
    im = picture("RGBA")
    masks = struct.pack("<IIII", *(0xFF << 8 * order.index(band) for band in "RGBA"))
    pixels = np.asarray(im)[::-1][..., ["RGBA".index(band) for band in order]]
    return bmp_bytes(im.width, im.height, 32, pixels.tobytes(), compression=3, masks=masks, header_size=124)


def bmp_16bit(green_bits: int = 6) -> bytes:
    """A 16-bit BMP: 5-6-5 with BI_BITFIELDS masks, or 5-5-5 plain BI_RGB."""
    im = picture()
    r, g, b = (np.asarray(im)[::-1].astype(np.uint16)[..., i] for i in range(3))
    pixels = (r >> 3) << (5 + green_bits) | (g >> (8 - green_bits)) << 5 | b >> 3
    if green_bits == 6:
        return bmp_bytes(
            im.width,
            im.height,
            16,
            pixels.astype("<u2").tobytes(),
            compression=3,
            masks=struct.pack("<III", 0xF800, 0x7E0, 0x1F),
        )
    return bmp_bytes(im.width, im.height, 16, pixels.astype("<u2").tobytes())


def bmp_rle8() -> bytes:
    """An 8-bit RLE-compressed BMP (grey ramp palette), two pixels per run."""
    grey = np.asarray(picture("L"))[::-1]
    height, width = grey.shape
    rows = b"".join(b"".join(bytes([2, grey[y, x]]) for x in range(0, width, 2)) + b"\x00\x00" for y in range(height))
    ramp = b"".join(bytes([i, i, i, 0]) for i in range(256))
    return bmp_bytes(width, height, 8, rows + b"\x00\x01", compression=1, palette=ramp)


def gif_without_colour_map() -> bytes:
    """A GIF with neither a global nor a local colour table (Pillow shows it grey; TF fails)."""
    data = image_bytes("GIF", "P", (32, 24), interlace=False)
    table = 3 * (2 << (data[10] & 7))
    return data[:10] + bytes([data[10] & 0x7F]) + data[11:13] + data[13 + table :]


def gif_with_canvas(width: int, height: int) -> bytes:
    """A 32x24 single-frame GIF whose logical screen (canvas) claims another size."""
    data = image_bytes("GIF", "P", (32, 24), interlace=False)
    return data[:6] + struct.pack("<HH", width, height) + data[10:]


# Made with libjpeg-turbo 3.1 (imagecodecs), which Pillow cannot drive this way: a 16x12 lossless
# (SOF3) JPEG, which TF 2.21 cannot decode, and a 16x12 YCCK JPEG (Adobe transform 2), which it can.
_LOSSLESS_JPEG = (
    "/9j/7gAOQWRvYmUAZAAAAAAA/8MAEQgADAAQA1IRAEcRAEIRAP/EABcAAAMBAAAAAAAAAAAAAAAAAAAEBQj/2gAMA1IARwBCAAEAAM/5/wA/"
    "0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0Bm"
    "gM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0"
    "BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0Bmg"
    "M0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0B"
    "mgM0BkqM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0BmgM0Bn//2Q=="
)
_YCCK_JPEG = (
    "/9j/7gAOQWRvYmUAZAAAAAAC/9sAQwADAgIDAgIDAwMDBAMDBAUIBQUEBAUKBwcGCAwKDAwLCgsLDQ4SEA0OEQ4LCxAWEBETFBUVFQwPFxgW"
    "FBgSFBUU/9sAQwEDBAQFBAUJBQUJFA0LDRQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU/8AAFAgA"
    "DAAQBAEiAAIRAQMRAQQiAP/EAB8AAAEFAQEBAQEBAAAAAAAAAAABAgMEBQYHCAkKC//EALUQAAIBAwMCBAMFBQQEAAABfQECAwAEEQUSITFB"
    "BhNRYQcicRQygZGhCCNCscEVUtHwJDNicoIJChYXGBkaJSYnKCkqNDU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6g4SF"
    "hoeIiYqSk5SVlpeYmZqio6Slpqeoqaqys7S1tre4ubrCw8TFxsfIycrS09TV1tfY2drh4uPk5ebn6Onq8fLz9PX29/j5+v/EAB8BAAMBAQEB"
    "AQEBAQEAAAAAAAABAgMEBQYHCAkKC//EALURAAIBAgQEAwQHBQQEAAECdwABAgMRBAUhMQYSQVEHYXETIjKBCBRCkaGxwQkjM1LwFWJy0QoW"
    "JDThJfEXGBkaJicoKSo1Njc4OTpDREVGR0hJSlNUVVZXWFlaY2RlZmdoaWpzdHV2d3h5eoKDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKz"
    "tLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uLj5OXm5+jp6vLz9PX29/j5+v/aAA4EAQACEQMRBAAAPwD5X8FfAv8A1f8Ao/6V754K+BX+r/0f"
    "9K9q8FeEdM/d/uK988FeENM/d/uKnL8fPQ83w98QcZ7m5+VVFFFf/9k="
)


def lossless_jpeg() -> bytes:
    return base64.b64decode(_LOSSLESS_JPEG)


def ycck_jpeg() -> bytes:
    return base64.b64decode(_YCCK_JPEG)


# Broken inputs.


def zero_bytes() -> bytes:
    return b""


def truncated_jpeg() -> bytes:
    """A 200x150 JPEG cut off 40% of the way into its entropy-coded data."""
    data = image_bytes("JPEG", "RGB", (200, 150), quality=90)
    scan = data.index(b"\xff\xda")
    return data[: scan + (len(data) - scan) * 2 // 5]


def jpeg_without_end_marker() -> bytes:
    """A JPEG missing only its final end-of-image marker, cut where Pillow still decodes it
    (its last byte of image data ends a buffer) but TensorFlow does not."""
    return image_bytes("JPEG", "RGB", (152, 114), quality=90)[:-2]


def jpeg_with_stray_marker() -> bytes:
    """A JPEG with 4 bytes of its image data overwritten by what reads as an APP6 marker whose
    length runs past the end of the file: Pillow decodes around it, TensorFlow fails."""
    data = image_bytes("JPEG", "RGB", (64, 48), quality=90)
    at = data.index(b"\xff\xda") + (len(data) - data.index(b"\xff\xda")) // 2
    return data[:at] + b"\xff\xe6\xaf\xdb" + data[at + 4 :]


def truncated_png() -> bytes:
    """A 200x150 PNG cut off in the middle of its image data."""
    data = image_bytes("PNG", "RGB", (200, 150))
    return data[: len(data) // 2]


def html_page() -> bytes:
    """What a web server's error page looks like once saved as photo.jpg."""
    return (
        b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n"
        b"<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p></body></html>\n"
    )


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A PNG of a few hundred bytes whose IHDR (correct CRC) declares width x height RGBA pixels;
    its image data is a zlib stream of zeros, far too short for that size."""
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
        + png_chunk(b"IDAT", zlib.compress(b"\x00" * 4096))
        + png_chunk(b"IEND", b"")
    )


def corrupt_jpeg() -> bytes:
    """A complete JPEG whose frame header points a component at a quantization table that was
    never defined: libjpeg (Pillow's and TF's) gives up on it."""
    data = bytearray(image_bytes("JPEG", "RGB", (64, 48), quality=90))
    sof = data.index(b"\xff\xc0")
    data[sof + 10 + 2] = 3  # first component's table selector (tables 0 and 1 exist)
    return bytes(data)


def png_with_bad_crc() -> bytes:
    """A PNG whose image data decodes fine but whose IDAT CRC is wrong (libpng refuses it)."""
    data = bytearray(image_bytes("PNG", "RGB", (64, 48)))
    crc = data.index(b"IEND") - 5  # last byte of the chunk before IEND: IDAT's CRC
    data[crc] ^= 0xFF
    return bytes(data)


def corrupt_png() -> bytes:
    """A PNG whose chunks are all intact (right lengths and CRCs, so verify() passes) but whose
    zlib stream is garbage: only decoding finds it, as TF would."""
    good = image_bytes("PNG", "RGB", (64, 48))
    idat = good.index(b"IDAT") - 4
    length = struct.unpack(">I", good[idat : idat + 4])[0]
    payload = bytearray(good[idat + 8 : idat + 8 + length])
    payload[2:40] = bytes(range(38))
    return good[:idat] + png_chunk(b"IDAT", bytes(payload)) + good[idat + 12 + length :]
