"""Every input of every shape with every --kind (and none): what the kind reads runs; anything else
is refused before any work in one line that says what the input is and names the --kind (or the
--input) that reads it, or says that none does and what would (pipeline.input_shape, the one place
that decides what an input is)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample"
KINDS = (None, "images", "image_csv", "csv")
_WORD = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


def _photos(folder: pathlib.Path, per_class: int = 2) -> list[str]:
    """Class folders of sample images below `folder`; their paths relative to it."""
    names = []
    for label in ("circle", "square"):
        (folder / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:per_class]:
            shutil.copy(path, folder / label / path.name)
            names.append(f"{label}/{path.name}")
    return names


class Drawn:
    """The choices of the inputs below, drawn by hypothesis."""

    def __init__(self, draw):
        self.draw = draw

    def table(self) -> str:
        columns = self.draw(st.lists(_WORD.filter(lambda w: w != "image_uri"), min_size=1, max_size=5, unique=True))
        width = len(columns)
        rows = self.draw(st.lists(st.lists(st.integers(0, 999), min_size=width, max_size=width), min_size=2))
        return "\n".join([",".join(columns), *(",".join(map(str, row)) for row in rows)]) + "\n"

    def splits(self) -> list[str]:
        validation = self.draw(st.sampled_from(["validation", "val", "VALID", "dev"]))
        return self.draw(st.lists(st.sampled_from(["train", validation, "Test"]), min_size=1, max_size=3, unique=True))

    def header(self) -> bool:
        return self.draw(st.booleans())

    def split_values(self, n: int) -> list[str]:
        return self.draw(st.lists(st.sampled_from(["TRAIN", "VALIDATION", "TEST", ""]), min_size=n, max_size=n))

    def name(self) -> str:
        return self.draw(_WORD)


class Fixed:
    """The same choices, fixed: inputs as a user would make them."""

    def table(self) -> str:
        return "a,b\n1,2\n3,4\n"

    def splits(self) -> list[str]:
        return ["train", "validation"]

    def header(self) -> bool:
        return True

    def split_values(self, n: int) -> list[str]:
        return ["TRAIN"] * n

    def name(self) -> str:
        return "nothing"


@dataclasses.dataclass
class Input:
    """An input made on disk: `path` (as --input), the kinds that read it as given, and what the
    refusal of any other kind must say (`says`, given the kind as the user gave it)."""

    path: str
    reads: tuple[str, ...]
    says: Callable[[str | None], list[str]]


def class_folders(root: pathlib.Path, choose) -> Input:
    _photos(root / "photos")
    return Input(str(root / "photos"), ("images",), lambda kind: ["is a folder of class folders", "give --kind images"])


def split_folders(root: pathlib.Path, choose) -> Input:
    for split in choose.splits():
        _photos(root / "data" / split, per_class=1)
    return Input(str(root / "data"), ("images",), lambda kind: ["is a folder of split folders", "give --kind images"])


def table_file(root: pathlib.Path, choose) -> Input:
    (root / "t.csv").write_text(choose.table())
    return Input(str(root / "t.csv"), ("csv",), lambda kind: ["is a tabular CSV file", "give --kind csv"])


def table_pattern(root: pathlib.Path, choose) -> Input:
    (root / "tables").mkdir()
    text = choose.table()
    for name in ("a.csv", "b.csv"):
        (root / "tables" / name).write_text(text)
    return Input(str(root / "tables" / "*.csv"), ("csv",), lambda kind: ["is a file pattern", "give --kind csv"])


def table_folder(root: pathlib.Path, choose) -> Input:
    (root / "tables").mkdir()
    (root / "tables" / "a.csv").write_text(choose.table())
    pattern = f"--input '{root / 'tables' / '*.csv'}'"
    return Input(
        str(root / "tables"),
        (),
        lambda kind: ["is a folder of 1 CSV file", pattern] + ([] if kind == "csv" else ["--kind csv"]),
    )


def image_csv(root: pathlib.Path, choose) -> Input:
    images = _photos(root / "img")
    header = choose.header()
    splits = choose.split_values(len(images))
    rows = [f"{split},img/{name},{name.split('/')[0]}" for split, name in zip(splits, images, strict=True)]
    (root / "labels.csv").write_text("\n".join((["split,image_uri,label"] if header else []) + rows) + "\n")
    return Input(
        str(root / "labels.csv"), ("image_csv",), lambda kind: ["is a CSV file of image URIs", "give --kind image_csv"]
    )


def image_csv_pattern(root: pathlib.Path, choose) -> Input:
    made = image_csv(root, choose)
    pattern = str(root / "*.csv")
    return Input(
        pattern, (), lambda kind: [f"is a file pattern whose first match, {made.path}, is a CSV file of image URIs"]
    )


def flat_images(root: pathlib.Path, choose) -> Input:
    (root / "flat").mkdir()
    for path in sorted((SAMPLE / "images" / "circle").iterdir())[:3]:
        shutil.copy(path, root / "flat" / path.name)
    return Input(str(root / "flat"), (), lambda kind: ["images without class folders", "which no --kind reads"])


def image_file(root: pathlib.Path, choose) -> Input:
    names = _photos(root / "photos")
    return Input(str(root / "photos" / names[0]), (), lambda kind: ["is an image file (.jpg)", "which no --kind reads"])


def dataset(root: pathlib.Path, choose) -> Input:
    (root / "converted").mkdir()
    (root / "converted" / "manifest.json").write_text("{}")
    return Input(
        str(root / "converted"),
        (),
        lambda kind: ["is a dataset folder (it holds manifest.json)", "which no --kind reads"],
    )


def binary(root: pathlib.Path, choose) -> Input:
    (root / "data.csv").write_bytes(b"\x00\x05\x16\x07" + os.urandom(64))
    return Input(str(root / "data.csv"), (), lambda kind: ["is binary data, not text", "which no --kind reads"])


def fifo(root: pathlib.Path, choose) -> Input:
    os.mkfifo(root / "pipe.csv")
    return Input(str(root / "pipe.csv"), (), lambda kind: ["is not a regular file: a FIFO", "which no --kind reads"])


def missing(root: pathlib.Path, choose) -> Input:
    name = choose.name()
    return Input(str(root / name), (), lambda kind: [f"input {root / name} does not exist"])


SHAPES = (
    class_folders,
    split_folders,
    table_file,
    table_pattern,
    table_folder,
    image_csv,
    image_csv_pattern,
    flat_images,
    image_file,
    dataset,
    binary,
    fifo,
    missing,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), shape=st.sampled_from(SHAPES), kind=st.sampled_from(KINDS))
def test_every_input_with_every_kind_runs_or_is_one_line_naming_what_reads_it(caplog, data, shape, kind):
    with tempfile.TemporaryDirectory() as folder:
        root = pathlib.Path(folder)
        made = shape(root, Drawn(data.draw))
        caplog.clear()
        argv = ["--input", made.path, "--output", str(root / "out")] + (["--kind", kind] if kind else [])
        code = main(argv)
        if (kind or "images") in made.reads:
            assert code == 0, caplog.text
            return
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert code == 2 and len(errors) == 1, caplog.text
        assert not any("planned" in r.getMessage() for r in caplog.records), "nothing may be read first"
        line = errors[0]
        assert line.startswith(f"input {made.path} ") and "\n" not in line
        for words in made.says(kind):
            assert words in line, (words, line)
        if (
            (kind or "images") not in made.reads
            and "which no --kind reads" not in line
            and "does not exist" not in line
        ):
            assert f"--kind {kind or 'images'}{'' if kind else ', the default,'} reads " in line, line
        assert not (root / "out").exists()


@pytest.mark.parametrize(
    "shape, argv, says",
    [
        (table_file, [], "is a tabular CSV file (2 columns: ['a', 'b']); --kind images, the default, reads a folder"),
        (table_pattern, [], "is a file pattern (only --kind csv reads patterns); --kind images, the default, reads"),
        (table_folder, ["--kind", "csv"], "is a folder of 1 CSV file (such as a.csv); --kind csv reads tabular CSV"),
        (class_folders, ["--kind", "image_csv"], "is a folder of class folders; --kind image_csv reads one CSV file"),
        (
            table_pattern,
            ["--kind", "image_csv"],
            "is a file pattern (only --kind csv reads patterns); --kind image_csv",
        ),
        (image_csv_pattern, ["--kind", "image_csv"], "is a file pattern whose first match, "),
        (image_csv, ["--kind", "csv"], "is a CSV file of image URIs"),
    ],
)
def test_a_kind_that_does_not_read_the_input_is_one_line_as_a_user_sees_it(tmp_path, shape, argv, says):
    made = shape(tmp_path, Fixed())
    result = run_pipeline(["--input", made.path, "--output", tmp_path / "out", *argv])
    assert result.returncode == 2, result.stderr
    line = the_one_line(result.stderr)
    assert says in line, line
    assert not (tmp_path / "out").exists()
