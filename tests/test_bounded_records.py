"""pipeline.tfrecord_reader trusts no length field: whatever length a record's header claims (with
a valid length CRC, so the framing check passes), reading fails as a RecordError naming the record,
in bounded memory, never a MemoryError; and `inspect --verify` names such a shard in one line."""

from __future__ import annotations

import gzip
import json
import pathlib
import shutil
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.tfrecord_framing import MAX_EXAMPLE_BYTES, framed, masked_crc32c
from pipeline.cli import main as pipeline_main
from pipeline.tfrecord_reader import RecordError, read_framed_records
from tests.trainer.conftest import SAMPLE, converted

MEMORY_BOUND = 8 << 20  # a few of the reader's chunks: far below the lengths claimed
CLAIMS = st.one_of(
    st.integers(0, 2**64 - 1),
    st.integers(MAX_EXAMPLE_BYTES - 2, MAX_EXAMPLE_BYTES + 2),
    st.integers(0, 100),
)


def header(length: int) -> bytes:
    """A record's length field with its valid CRC."""
    field = struct.pack("<Q", length)
    return field + struct.pack("<I", masked_crc32c(field))


@st.composite
def lying_files(draw) -> tuple[int, bytes]:
    """(claimed length, the file's bytes, uncompressed): a good record, then a header claiming the
    length, then fewer bytes than the claimed payload and its CRC."""
    claimed = draw(CLAIMS)
    held = draw(st.binary(max_size=min(claimed + 3, 4096)))
    return claimed, b"".join(framed(b"a good first record")) + header(claimed) + held


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("lying")


@settings(max_examples=200, deadline=None)
@given(case=lying_files(), compression=st.sampled_from(["GZIP", "NONE"]))
def test_a_claimed_length_fails_as_a_record_error_in_bounded_memory(folder, case, compression):
    claimed, raw = case
    path = folder / f"shard.{compression}"
    path.write_bytes(gzip.compress(raw) if compression == "GZIP" else raw)
    tracemalloc.start()
    try:
        with pytest.raises(RecordError) as e:
            list(read_framed_records(str(path), compression, inside=None))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.value.record == 1
    assert ("over the" if claimed > MAX_EXAMPLE_BYTES else "truncated") in e.value.message, e.value.message
    assert peak < MEMORY_BOUND


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, pathlib.Path]:
    """The bundled sample images, two shards per split, by compression: uncompressed converted
    here, GZIP shared with the trainer and inspect tests."""
    out = tmp_path_factory.mktemp("uncompressed") / "dataset"
    argv = ["--input", SAMPLE / "images", "--output", out, "--num_shards", "2", "--compression", "none"]
    assert pipeline_main([str(a) for a in argv]) == 0
    return {"NONE": out, "GZIP": converted("images", tmp_path_factory)}


def _claim(path: pathlib.Path, length: int, compression: str) -> None:
    """Rewrites record 1 of the shard at `path` to claim `length` bytes (with a valid length CRC)."""
    raw = path.read_bytes()
    raw = bytearray(gzip.decompress(raw) if compression == "GZIP" else raw)
    (first,) = struct.unpack("<Q", raw[:8])
    start = 12 + first + 4
    raw[start : start + 12] = header(length)
    path.write_bytes(gzip.compress(bytes(raw)) if compression == "GZIP" else bytes(raw))


@pytest.mark.parametrize(("compression", "claimed"), [("NONE", 2**40), ("GZIP", 2**64 - 1)])
def test_inspect_verify_names_a_shard_claiming_a_huge_record_in_one_line(
    datasets, tmp_path, capsys, caplog, compression, claimed
):
    data = pathlib.Path(shutil.copytree(datasets[compression], tmp_path / "data"))
    shard = json.loads((data / "manifest.json").read_text())["splits"]["train"]["shards"][0]
    _claim(data / shard, claimed, compression)
    capsys.readouterr()
    assert pipeline_main(["inspect", str(data), "--verify"]) == 1
    out, err = capsys.readouterr()
    problem = f"{shard}: record 1: length {claimed:,} is over the {MAX_EXAMPLE_BYTES:,} bytes TensorFlow parses"
    assert sum(line.strip().startswith(problem) for line in out.splitlines()) == 1, out
    assert "Traceback" not in out + err + caplog.text


def test_a_contact_sheet_of_a_shard_claiming_a_huge_record_is_refused_in_one_line(datasets, tmp_path, capsys):
    data = pathlib.Path(shutil.copytree(datasets["NONE"], tmp_path / "data"))
    shard = json.loads((data / "manifest.json").read_text())["splits"]["train"]["shards"][0]
    _claim(data / shard, 2**40, "NONE")
    sheet = tmp_path / "sheet.png"
    assert pipeline_main(["inspect", str(data), "--contact_sheet", str(sheet), "--samples", "400"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{shard}: record 1: length" in err and "Traceback" not in err
    assert not sheet.exists()
