"""An image CSV read in parts, side by side, gives exactly the rows and dead letters that reading it
whole gives: the planner cuts it only where records start (quoted line ends, a BOM, blank lines,
malformed and over-long records, quotes left open, bytes that are not UTF-8 included), on
generated CSVs."""

from __future__ import annotations

import pathlib
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import planning
from pipeline.cli import main
from pipeline.config import load_config
from tests import broken_images
from tests.dataset_reader import load_manifest, read_split
from transforms.csv_records import WHOLE_CSV
from transforms.sources import CsvChanged, Roots, _ParseImageCsvRows

FRACTIONS = (("train", 0.8), ("validation", 0.2))

cells = st.one_of(
    st.sampled_from(["a.jpg", "b.jpg", "sub/c.jpg", "cat", "dog", "TRAIN", "", " "]),
    st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=6),
    st.just('"quoted, with\nits own line end"'),
    st.just('"a quote left open'),  # its record a dead letter, the lines after it read again
)
rows = st.lists(st.lists(cells, min_size=1, max_size=4), max_size=25)


def csv_bytes(header: bool, bom: bool, table: list[list[str]], line_end: str) -> bytes:
    text = ("image_uri,label,split" + line_end if header else "") + "".join(",".join(row) + line_end for row in table)
    data = text.encode("utf-8", "surrogatepass")
    return (b"\xef\xbb\xbf" if bom else b"") + data.replace("\udce9".encode("utf-8", "surrogatepass"), b"\xe9")


def parsed(step: _ParseImageCsvRows, parts) -> list:
    return [(type(o).__name__, getattr(o, "value", o)) for part in parts for o in step.process(part)]


@settings(max_examples=60, deadline=None)
@given(st.booleans(), st.booleans(), rows, st.sampled_from(["\n", "\r\n"]))
def test_reading_in_parts_gives_what_reading_whole_gives(header, bom, table, line_end):
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = pathlib.Path(tmp) / "labels.csv"
        csv_path.write_bytes(csv_bytes(header, bom, table, line_end))
        config = load_config(overrides={"kind": "image_csv", "input": str(csv_path), "output": "o"})
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(planning, "CSV_PART_BYTES", 1)  # a part per record
            try:
                plan = planning.make_plan(config)
            except planning.PlanError:
                return  # no image rows: nothing to read in parts
        size = csv_path.stat().st_size
        step = _ParseImageCsvRows(str(csv_path), "image_uri", "label", "split", FRACTIONS, Roots(), size)
        whole = parsed(step, WHOLE_CSV)
        assert parsed(step, plan.csv_parts) == whole
        assert [p.end for p in plan.csv_parts[:-1]] == [p.start for p in plan.csv_parts[1:]]


def test_a_part_of_a_csv_that_changed_size_since_planning_fails_the_run_saying_so(tmp_path):
    csv_path = tmp_path / "labels.csv"
    csv_path.write_text("".join(f"img{i}.jpg,cat\n" for i in range(50)))
    config = load_config(overrides={"kind": "image_csv", "input": str(csv_path), "output": "o"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planning, "CSV_PART_BYTES", 100)
        plan = planning.make_plan(config)
    assert len(plan.csv_parts) > 2
    csv_path.write_text("x.jpg,dog\n" + csv_path.read_text())
    step = _ParseImageCsvRows(str(csv_path), "image_uri", "label", "split", FRACTIONS, Roots(), plan.csv_size)
    with pytest.raises(CsvChanged, match="changed during the run"):
        list(step.process(plan.csv_parts[1]))


def test_a_run_that_reads_its_csv_in_parts_writes_what_a_run_reading_it_whole_writes(tmp_path, monkeypatch):
    (tmp_path / "images").mkdir()
    lines = ["image_uri,label"]
    for i in range(40):
        (tmp_path / "images" / f"{i}.png").write_bytes(broken_images.image_bytes("PNG", "RGB", size=(4 + i, 5)))
        lines.append(f"images/{i}.png,{'cat' if i % 3 else 'dog'}")
    lines.append("images/missing.png,cat")
    (tmp_path / "labels.csv").write_text("\n".join(lines) + "\n")
    args = ["--kind", "image_csv", "--input", str(tmp_path / "labels.csv"), "--max_error_fraction", "0.1"]
    assert main([*args, "--output", str(tmp_path / "whole")]) == 0
    monkeypatch.setattr(planning, "CSV_PART_BYTES", 64)
    assert main([*args, "--output", str(tmp_path / "parts")]) == 0

    def records(folder):
        return sorted(
            (r["image/filename"], r["image/class/text"], r["image/width"])
            for split in ("train", "validation")
            for r in read_split(folder, split)
        )

    assert records(tmp_path / "parts") == records(tmp_path / "whole")
    assert load_manifest(tmp_path / "parts").counts == load_manifest(tmp_path / "whole").counts


def test_a_gs_csv_is_read_in_parts_from_where_its_records_start(gcs_emulator, gcs_bucket):
    rows = [
        "image_uri,label",
        *(f'"img/{i},x.jpg",{"cat" if i % 2 else "dog"}' for i in range(30)),
        "a.jpg,\u00e9t\u00e9",
    ]
    csv_uri = f"gs://{gcs_bucket}/labels.csv"
    gcs_emulator.upload_bytes(csv_uri, ("\r\n".join(rows) + "\r\n").encode())
    config = load_config(overrides={"kind": "image_csv", "input": csv_uri, "output": "o"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planning, "CSV_PART_BYTES", 50)
        plan = planning.make_plan(config)
    assert len(plan.csv_parts) > 5
    step = _ParseImageCsvRows(csv_uri, "image_uri", "label", "split", FRACTIONS, Roots(), plan.csv_size)
    whole = parsed(step, WHOLE_CSV)
    assert len(whole) == 31 and parsed(step, plan.csv_parts) == whole
