"""What a file that should be text is, told from its first bytes: for messages that name the cause
(a workbook saved with a .csv name, a compressed file without its .gz) without quoting the bytes,
which are not text and would garble the terminal. And what a text file given as settings is when
it is a key (a PEM file, a service-account JSON key passed to --config by mistake): named so, its
secret never quoted. No I/O.
"""

from __future__ import annotations

# Leading bytes, and what a file that begins with them is.
_SIGNATURES = (
    (b"PK\x03\x04", "a ZIP archive (an Excel .xlsx or OpenDocument .ods workbook? export it as CSV)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Excel .xls workbook (export it as CSV)"),
    (b"\x1f\x8b", "GZIP-compressed data (name it .csv.gz to have it read so)"),
    (b"BZh", "BZIP2-compressed data (decompress it)"),
    (b"\xfd7zXZ\x00", "XZ-compressed data (decompress it)"),
    (b"(\xb5/\xfd", "Zstandard-compressed data (decompress it)"),
    (b"PAR1", "a Parquet file"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\xff\xfe", "UTF-16 text (save it as UTF-8)"),
    (b"\xfe\xff", "UTF-16 text (save it as UTF-8)"),
)


def what_it_is(head: bytes) -> str:
    """What a file whose first bytes are `head` is, when it is not UTF-8 text."""
    return binary_kind(head) or "text in another encoding than UTF-8 (Latin-1 or Windows-1252? save it as UTF-8)"


def binary_kind(head: bytes) -> str | None:
    """What a file whose first bytes are `head` is, when they say it is no text of one byte a
    character (UTF-8, Latin-1): a known format, UTF-16, or bytes holding NUL; None for such text."""
    for magic, name in _SIGNATURES:
        if head.startswith(magic):
            return name
    return "binary data, not text" if b"\x00" in head else None


# What a key's text begins with, or holds near its start (a JSON key's fields), and what it is.
_KEY_STARTS = (("-----BEGIN ", "a PEM key or certificate"), ("PuTTY-User-Key-File", "a PuTTY key"))
_KEY_FIELDS = ('"private_key"', '"client_secret"', '"refresh_token"')


def key_kind(text: str) -> str | None:
    """What a text file whose start is `text` is when it holds a key or credentials, not
    settings; None otherwise."""
    head = text.lstrip()
    for start, name in _KEY_STARTS:
        if head.startswith(start):
            return name
    if head.startswith("{") and any(field in head for field in _KEY_FIELDS):
        return "credentials in JSON (a service-account or OAuth client key)"
    return None
