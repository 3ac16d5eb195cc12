"""Sources cannot leak: no dead letter's reason, log line, warning, error report or `inspect`
output quotes a file that is not what it claims to be (/etc/passwd reached through a link in a
class folder, or named by an image CSV row): reasons describe its kind and size.

The property is checked on generated contents: a secret, in which every 4 consecutive bytes hold
a marker byte that no reason's own wording uses, is put at the start of a file after the first
bytes of some format, or into a real image (overwriting part of it, or after a cut). Any 4
consecutive bytes of the secret in a reason, in any form a program would write them in (as
Latin-1 or UTF-8 text, escaped, repr), were then quoted from the file."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import pathlib
import shutil
import string
import warnings

import apache_beam as beam
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.build import build_pipeline
from pipeline.cli import main
from pipeline.commands import inspect
from pipeline.config import load_config
from pipeline.folder_store import FolderPublication
from pipeline.planning import make_plan
from pipeline.runners import pipeline_options
from tests import broken_images as bi
from tests.dataset_reader import load_manifest, read_dead_letters
from transforms import image_check
from transforms.csv_records import WHOLE_CSV
from transforms.image_check import BadImage, check_image
from transforms.outcomes import DeadLetter
from transforms.sources import CsvRow, _ParseImageCsvRows

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample"
MARKERS = b"~^|`"
# The first bytes of formats Pillow knows (some of whose plugins quote header bytes or header
# lines in their errors) and of files often found under an image's name.
PREFIXES = [
    b"",
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"GIF89a\x08\x00\x08\x00\x80\x00\x00",
    b"RIFF\x24\x00\x00\x00WEBPVP8 ",
    b"II*\x00\x08\x00\x00\x00",
    b"MM\x00*\x00\x00\x00\x08",
    b"BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00\x00\x00",
    b"P6\n",
    b"Image type: RGB image\r\nName: ",
    b"#define im_width 8\n",
    b"/* XPM */\n",
    b"8BPS\x00\x01",
    b"\x00\x00\x01\x00\x01\x00",
    b"\x00\x00\x00\x0cjP  \r\n\x87\n",
    b"%PDF-1.7\n",
    b"PK\x03\x04",
    b"\x1f\x8b\x08\x00",
    b"<!DOCTYPE html>\n<html><head><title>",
    b"<?xml version='1.0'?>\n<svg>",
    b"root:x:0:0:root:/root:/bin/bash\n",
]
IMAGES = [
    bi.image_bytes("JPEG", "RGB", (16, 12)),
    bi.image_bytes("PNG", "RGB", (16, 12)),
    bi.image_bytes("GIF", "P", (16, 12)),
    bi.image_bytes("BMP", "RGB", (16, 12)),
    bi.image_bytes("WEBP", "RGB", (16, 12)),
    bi.image_bytes("TIFF", "RGB", (16, 12)),
]
_PNG = IMAGES[1]


_ANY_CHUNK = st.one_of(st.binary(max_size=3), st.text(max_size=3).map(str.encode).filter(lambda b: len(b) <= 3))
_TEXT_CHUNK = st.text(string.ascii_letters + string.digits + string.punctuation + " ", max_size=3).map(str.encode)


@st.composite
def secrets(draw, chunks=_ANY_CHUNK) -> bytes:
    """Chunks of up to 3 bytes, each followed by a marker."""
    pieces = draw(st.lists(st.tuples(chunks, st.sampled_from(MARKERS)), min_size=2, max_size=12))
    return b"".join(piece + bytes([marker]) for piece, marker in pieces)


@st.composite
def contents(draw) -> tuple[bytes, bytes]:
    """(a file's bytes, the secret in them): after a format's first bytes, over part of an
    image, or after an image cut short."""
    secret = draw(secrets())
    where = draw(st.sampled_from(["after a prefix", "over an image", "after a cut"]))
    if where == "after a prefix":
        return draw(st.sampled_from(PREFIXES)) + secret + draw(st.binary(max_size=64)), secret
    image = draw(st.sampled_from(IMAGES))
    at = draw(st.integers(0, len(image)))
    return image[:at] + secret + (image[at + len(secret) :] if where == "over an image" else b""), secret


def leaked(secret: bytes, text: str) -> list[str]:
    """The runs of 4 characters of `secret`, written any way, that `text` holds (only those with
    a marker or an escape's backslash: they cannot be a reason's own words)."""
    forms = {
        secret.decode("latin-1"),
        secret.decode("utf-8", "replace"),
        secret.decode("utf-8", "backslashreplace"),
        repr(secret)[2:-1],
    }
    runs = {form[i : i + 4] for form in forms for i in range(len(form) - 3)}
    marked = {run for run in runs if "\\" in run or any(chr(m) in run for m in MARKERS)}
    return sorted(run for run in marked if run in text)


@contextlib.contextmanager
def everything_said():
    """The log records (at INFO, as the CLI logs) and warnings emitted inside, as lines of text."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(self.format(record))

    handler, root = Keep(logging.INFO), logging.getLogger()
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = root.level
    # First: the CLI's handler (set up by any earlier command in this process) cuts each record
    # to one line in place (pipeline.cli.OneLine); this one sees it whole.
    root.handlers.insert(0, handler)
    root.setLevel(logging.INFO)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield said
        said.extend(str(w.message) for w in caught)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@settings(max_examples=300, deadline=None)
@given(contents())
@example((b"root:x:0:0:root:/root:/bin/bash\nse~cr^et|x`" * 3, b"se~cr^et|x`"))
@example((b"<html><title>ab~cd^</title></html>", b"ab~cd^"))
@example((b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDRta~b^", b"ta~b^"))
@example((_PNG[: _PNG.index(b"IEND")] + b"IE~D" + _PNG[_PNG.index(b"IEND") + 4 :], b"IE~D"))  # a chunk's type
@example((b"P6\n~~~~", b"~~~~"))  # Pillow: "invalid literal for int() with base 10: b'~~~~'"
def test_no_reason_log_line_or_warning_quotes_the_file(content):
    data, secret = content
    reason = ""  # an image has none: its bytes are what its record stores
    with everything_said() as said:
        try:
            check_image(data, 10_000_000)
        except BadImage as e:
            reason = e.reason
    assert not leaked(secret, reason), reason
    assert not leaked(secret, "\n".join(said)), said


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([b"", b"\xef\xbb\xbf", b"  \n"]), secrets(_TEXT_CHUNK))
def test_text_and_web_pages_are_described_by_kind_and_size(start, secret):
    text = start + b"user:" + secret + b"\n"
    page = start + b"<html><body>" + secret + b"</body></html>\n"
    for data, kind in ((text, "text"), (page, "HTML/XML (a web page saved under an image name?)")):
        with pytest.raises(BadImage) as raised:
            check_image(data, 10_000_000)
        assert (raised.value.stage, raised.value.reason) == ("identify", f"not an image: {len(data):,} bytes of {kind}")


def test_an_unexpected_error_is_logged_without_its_message(monkeypatch):
    """An error that may be a bug is logged with its traceback, but neither it nor the reason
    holds its message, which may quote the file."""

    def choke(im, data, target):
        raise RuntimeError(repr(data[:16]))

    monkeypatch.setitem(image_check._NATIVE, "PNG", choke)
    with everything_said() as said, pytest.raises(BadImage) as raised:
        check_image(_PNG, 10_000_000)
    assert raised.value.reason == "bad PNG data: unexpected RuntimeError"
    [logged] = said
    assert "RuntimeError" in logged and "in choke" in logged and repr(_PNG[:16]) not in logged


# End to end, through the command line.

PASSWD = b"root:x:0:0:root:/root:/bin/bash\nsecret~user^:x:1000:1000:|hidden`:/home/secret~user:/bin/sh\n"
PAGE = b"<!DOCTYPE html><html><body>token~abc^123|xyz` is yours</body></html>\n"


def _said_nothing_of(secret: bytes, out: pathlib.Path, *texts: str) -> None:
    """Neither the error report, nor `inspect`, nor `texts` (logs, output) quote `secret`."""
    report = "".join(p.read_text() for p in out.glob("errors-*.jsonl"))
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        inspect.main([str(out)])
    assert report and shown.getvalue()
    for text in (report, shown.getvalue(), *texts):
        assert not leaked(secret, text), leaked(secret, text)


def test_a_link_in_a_class_folder_to_a_private_file_is_described_not_quoted(tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO)
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "passwd").write_bytes(PASSWD)
    (tmp_path / "private" / "page.html").write_bytes(PAGE)
    photos = tmp_path / "photos"
    for label in ("circle", "square"):
        shutil.copytree(SAMPLE / "images" / label, photos / label)
    os.symlink(tmp_path / "private" / "passwd", photos / "circle" / "x.jpg")
    os.symlink(tmp_path / "private" / "page.html", photos / "square" / "y.jpg")
    out = tmp_path / "ds"
    assert main(["--input", str(photos), "--output", str(out), "--max_error_fraction", "0.5"]) == 0
    reasons = {pathlib.Path(d["source"]).name: (d["stage"], d["reason"]) for d in read_dead_letters(out)}
    assert reasons == {
        "x.jpg": ("identify", f"not an image: {len(PASSWD)} bytes of text"),
        "y.jpg": ("identify", f"not an image: {len(PAGE)} bytes of HTML/XML (a web page saved under an image name?)"),
    }
    said = caplog.text + "".join(capsys.readouterr())
    for secret in (b"secret~user^:x:1000:1000:|hidden`", b"token~abc^123|xyz`"):
        _said_nothing_of(secret, out, said)


def test_an_image_csv_row_naming_a_private_file_is_refused_or_described(tmp_path, capsys, caplog):
    """Outside the CSV's folder, a private file is a `parse` dead letter naming the row; in a
    configured root, it is read, and described."""
    caplog.set_level(logging.INFO)
    private = tmp_path / "private"
    private.mkdir()
    (private / "passwd").write_bytes(PASSWD)
    data = tmp_path / "data"
    shutil.copytree(SAMPLE / "images" / "circle", data / "images" / "circle")
    os.symlink(private / "passwd", data / "images" / "circle" / "link.jpg")
    images = sorted(p.name for p in (data / "images" / "circle").iterdir() if p.name != "link.jpg")
    rows = ["split,image_uri,label", *(f"TRAIN,images/circle/{name},circle" for name in images)]
    rows += [
        f"TRAIN,{private / 'passwd'},circle",
        "TRAIN,../private/passwd,circle",
        "TRAIN,images/circle/link.jpg,circle",
    ]
    (data / "labels.csv").write_text("\n".join(rows) + "\n")
    args = ["--kind", "image_csv", "--input", str(data / "labels.csv"), "--max_error_fraction", "0.5"]

    assert main([*args, "--output", str(tmp_path / "confined")]) == 0
    letters = read_dead_letters(tmp_path / "confined")
    first = len(images) + 2
    assert [(d["source"], d["stage"]) for d in letters] == [
        (f"{data / 'labels.csv'}:{line}", "parse") for line in (first, first + 1, first + 2)
    ]
    assert [d["reason"].split(" ", 1)[1].split("; to read it, add ")[0] for d in letters] == [
        "is neither below the CSV's folder nor below a folder of image_csv.roots",
        "climbs out of the CSV's folder (..), and no folder of image_csv.roots holds it",
        f"leads out of the CSV's folder and image_csv.roots through a symbolic link, to {private}",
    ]
    assert all(
        d["reason"].endswith(f"to read it, add {private}: --image_roots {private} (image_csv.roots)") for d in letters
    )

    config = tmp_path / "roots.yaml"
    config.write_text(json.dumps({"image_csv": {"roots": [str(private)]}}))
    assert main([*args, "--output", str(tmp_path / "rooted"), "--config", str(config)]) == 0
    # The path and `../` name one source (the second row a duplicate); the link is another, read too.
    described = f"not an image: {len(PASSWD)} bytes of text"
    assert sorted((d["source"], d["stage"], d["reason"]) for d in read_dead_letters(tmp_path / "rooted")) == [
        (str(data / "images" / "circle" / "link.jpg"), "identify", described),
        (f"{data / 'labels.csv'}:{first + 1}", "duplicate", f"duplicate row of line {first} (../private/passwd)"),
        (str(private / "passwd"), "identify", described),
    ]
    assert load_manifest(tmp_path / "rooted").counts.written == len(images)
    said = caplog.text + "".join(capsys.readouterr())
    for out in (tmp_path / "confined", tmp_path / "rooted"):
        _said_nothing_of(b"secret~user^:x:1000:1000:|hidden`", out, said)


def _csv_rows_step(beam_args: list[str], tmp_path: pathlib.Path) -> _ParseImageCsvRows:
    """The step that parses an image CSV's rows, in the job built for `beam_args`."""
    (tmp_path / "images").mkdir(parents=True)
    (tmp_path / "labels.csv").write_text("images/a.jpg,cat\n")
    (tmp_path / "images" / "a.jpg").write_bytes(bi.image_bytes("JPEG", "RGB"))
    config = load_config(
        None, {"kind": "image_csv", "input": str(tmp_path / "labels.csv"), "output": str(tmp_path / "ds")}
    )
    plan = make_plan(config)
    # Only built, never run: the Pipeline object (whose checks of Dataflow options would reach
    # for GCS) gets a local runner; the job is built for the runner its options name.
    p = beam.Pipeline(runner="BundleBasedDirectRunner", options=pipeline_options(beam_args))
    build_pipeline(p, plan, config, FolderPublication(plan.output, "run1"))
    found = []

    class Find(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            fn = getattr(node.transform, "fn", None)
            if isinstance(fn, _ParseImageCsvRows):
                found.append(fn)

    p.visit(Find())
    [step] = found
    return step


def test_a_job_on_dataflow_reads_no_local_path_of_an_image_csv(tmp_path):
    """On Dataflow a local path names a file on the worker's disk, never the user's: every such
    row is a dead letter there, whatever the roots; local runners read them."""
    dataflow = ["--runner", "DataflowRunner"]
    [refused] = [o.value for o in _csv_rows_step(dataflow, tmp_path / "dataflow").process(WHOLE_CSV[0])]
    assert isinstance(refused, DeadLetter) and refused.stage == "parse"
    assert refused.reason == (
        "images/a.jpg is a local path, and this runner's workers would read their own disk, not yours (use gs://)"
    )
    [row] = _csv_rows_step([], tmp_path / "local").process(WHOLE_CSV[0])
    assert isinstance(row, CsvRow) and row.source.uri == str(tmp_path / "local" / "images" / "a.jpg")
