"""core.file_signatures: what a file that should be text is, named from its first bytes, for every
kind of file people save with a .csv name, and never by quoting them."""

import gzip
import io
import sqlite3
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from core.file_signatures import what_it_is


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("xl/workbook.xml", "<workbook/>")
    return out.getvalue()


def _image(fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (2, 2)).save(out, fmt)
    return out.getvalue()


def _sqlite(tmp_path) -> bytes:
    sqlite3.connect(tmp_path / "d.db").execute("create table t (a)").connection.commit()
    return (tmp_path / "d.db").read_bytes()


@pytest.mark.parametrize(
    "make, named",
    [
        (lambda t: _zip(), "a ZIP archive (an Excel .xlsx"),
        (lambda t: gzip.compress(b"a,b\n1,2\n"), "GZIP-compressed data (name it .csv.gz"),
        (lambda t: _image("PNG"), "a PNG image"),
        (lambda t: _image("JPEG"), "a JPEG image"),
        (_sqlite, "an SQLite database"),
        (lambda t: "a,b\n".encode("utf-16"), "UTF-16 text"),
        (lambda t: "café,b\n".encode("latin-1"), "text in another encoding than UTF-8"),
        (lambda t: b"\x00\x01\x02abc", "binary data, not text"),
    ],
)
def test_each_kind_of_file_is_named_from_its_first_bytes(tmp_path, make, named):
    assert what_it_is(make(tmp_path)[:64]).startswith(named)


@given(st.binary(max_size=64))
def test_the_description_never_quotes_the_bytes(head):
    described = what_it_is(head)
    assert described.isprintable() and described.isascii()
