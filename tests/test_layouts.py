"""The layouts users already have become the right dataset, end to end as a user runs them (the CLI
as a process, TensorFlow reading the records back): image folders split into train/val/test folders
(transforms.folder_layout). A layout the run cannot decide is refused in one line naming the
setting that decides it."""

from __future__ import annotations

import io
import pathlib
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from pipeline.config import load_config
from pipeline.planning import PlanError, make_plan
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from tests.subprocess_limits import run_pipeline
from transforms.splits import SPLIT_NAMES

_RNG = np.random.default_rng(0)


def jpeg() -> bytes:
    """A small JPEG of noise: every one has other bytes (no copies between splits)."""
    out = io.BytesIO()
    Image.fromarray(_RNG.integers(0, 256, (12, 16, 3), dtype=np.uint8)).save(out, "JPEG")
    return out.getvalue()


def tree(root: pathlib.Path, files: dict[str, bytes]) -> pathlib.Path:
    for key, data in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    return root


def one_line_refusal(argv) -> str:
    """stderr's last line of a command that must exit 2 before any work, with nothing above it but
    log lines (no traceback, no usage block)."""
    result = run_pipeline(argv)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert not any(line.startswith(("Traceback", "usage:")) for line in lines), result.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def split_folders(tmp_path_factory) -> pathlib.Path:
    """TFDS ImageFolder's layout: Train/ and val/ (any case), each with class folders, a sub-folder
    below a class, and an image directly in a split folder (no label)."""
    keys = [f"Train/{label}/{i}.jpg" for label in ("cat", "dog") for i in range(6)]
    keys += [f"val/{label}/{i}.jpg" for label in ("cat", "dog") for i in range(3)]
    keys += ["Train/dog/puppies/p.jpg", "val/unlabelled.jpg"]
    return tree(tmp_path_factory.mktemp("in") / "photos", {key: jpeg() for key in keys})


def test_split_folders_are_read_as_splits_with_labels_from_the_folders_below(split_folders, tmp_path):
    out = tmp_path / "out"
    result = run_pipeline(["--input", split_folders, "--output", out, "--max_error_fraction", "0.1"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "read as split folders: Train/ -> train, val/ -> validation" in result.stdout
    manifest = load_manifest(out)
    assert manifest.inputs["layout"] == {
        "folders": "split_folders",
        "split_folders": {"Train": "train", "val": "validation"},
    }
    assert manifest.label_map == ("cat", "dog")
    assert {name: split.records for name, split in manifest.splits.items()} == {"train": 13, "validation": 6}
    for split in manifest.splits:
        for record in read_split(out, split):
            key = pathlib.Path(record["image/filename"].decode()).relative_to(split_folders).as_posix()
            folder, label = key.split("/")[:2]
            assert (split, record["image/class/text"].decode()) == (SPLIT_NAMES[folder.lower()], label)
            assert record["image/class/label"] == manifest.label_map.index(label)
            assert record["image/encoded"] == (split_folders / key).read_bytes()
    [letter] = read_dead_letters(out)
    assert letter["source"] == str(split_folders / "val/unlabelled.jpg") and letter["stage"] == "label"


def test_the_setting_reads_split_named_folders_as_classes(split_folders, tmp_path):
    out = tmp_path / "out"
    result = run_pipeline(["--input", split_folders, "--output", out, "--layout", "class_folders"])
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = load_manifest(out)
    assert manifest.label_map == ("Train", "val") and manifest.inputs["layout"] == {"folders": "class_folders"}
    assert set(manifest.splits) == {"train", "validation"}  # hashed, as for any class folders


def test_a_mix_of_split_and_class_folders_is_refused_in_one_line(tmp_path):
    source = tree(tmp_path / "photos", {"train/cat/1.jpg": jpeg(), "dog/1.jpg": jpeg(), "test/cat/2.jpg": jpeg()})
    line = one_line_refusal(["--input", source, "--output", tmp_path / "out"])
    assert line.endswith(
        f" {source}: its folders mix split folders (test/, train/) with other folders (dog/): put the class "
        "folders inside the split folders (<split>/<label>/...), or read every folder as a class with --layout "
        "class_folders"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given", [["--splits", "train=0.9,validation=0.1"], ["--config", "splits.yaml"]])
def test_split_fractions_are_refused_for_split_folders_which_give_the_splits(split_folders, tmp_path, given):
    (tmp_path / "splits.yaml").write_text("splits: {train: 0.5, validation: 0.5}\n")
    given = [str(tmp_path / arg) if arg.endswith(".yaml") else arg for arg in given]
    line = one_line_refusal(["--input", split_folders, "--output", tmp_path / "out", *given])
    assert "holds split folders (Train/, val/), which give each image its split: leave out --splits" in line
    assert line.endswith("--layout class_folders")


def test_split_folders_set_in_the_config_refuse_folders_that_name_no_split(tmp_path):
    source = tree(tmp_path / "photos", {"train/cat/1.jpg": jpeg(), "holdout/cat/2.jpg": jpeg()})
    (tmp_path / "c.yaml").write_text("image: {layout: split_folders}\n")
    line = one_line_refusal(["--input", source, "--output", tmp_path / "out", "--config", tmp_path / "c.yaml"])
    assert "holdout/ is not named as a split" in line and line.endswith("or set --layout auto")


folder_name = st.sampled_from(["cat", "dog", "Train", "val", "VALID", "test", "dev", "training", "n01", "testing"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(folder_name, st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3), min_size=1))
def test_every_tree_of_split_and_class_folders_is_planned_as_its_names_say(tmp_path_factory, top):
    """Generated trees: the planner reads split-named folders as splits with the labels below them,
    other folders as classes, and refuses a mix in one line; it never makes a class of a split."""
    root = tree(
        tmp_path_factory.mktemp("tree"),
        {f"{folder}/{label}/{i}.jpg": b"x" for folder, labels in top.items() for i, label in enumerate(labels)},
    )
    splits = {name: SPLIT_NAMES[name.lower()] for name in top if name.lower() in SPLIT_NAMES}
    config = load_config(None, {"input": str(root), "output": str(root.parent / "out")})
    if splits and len(splits) < len(top):
        with pytest.raises(PlanError, match="mix split folders"):
            make_plan(config)
        return
    if len(set(splits.values())) < len(splits):
        with pytest.raises(PlanError, match="all name split"):
            make_plan(config)
        return
    if len(top) == 1 and not splits and len(set(*top.values())) > 1:  # the dataset one level down
        with pytest.raises(PlanError, match="which would all be one class"):
            make_plan(config)
        return
    plan = make_plan(config)
    if splits:
        assert plan.label_map == tuple(sorted({label for labels in top.values() for label in labels}))
        assert set(plan.shards) == set(splits.values())
        assert not set(plan.label_map) & set(top)
    else:
        assert plan.label_map == tuple(sorted(top))


def test_a_refresh_of_split_folders_keeps_their_splits_and_label_ids(tmp_path):
    source = tree(
        tmp_path / "photos",
        {f"{s}/{label}/{i}.jpg": jpeg() for s in ("train", "test") for label in "bc" for i in range(2)},
    )
    root = tmp_path / "root"
    assert run_pipeline(["refresh", "--input", source, "--output", root]).returncode == 0
    tree(source, {"train/a/new.jpg": jpeg(), "test/c/new.jpg": jpeg()})
    result = run_pipeline(["refresh", "--input", source, "--output", root])
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = load_manifest(root / (root / "LATEST").read_text().strip())
    assert manifest.label_map == ("b", "c", "a")  # ids kept, the new class after them
    assert {name: split.records for name, split in manifest.splits.items()} == {"train": 5, "test": 5}


# --- tables


def iris_rows(count: int = 30) -> list[tuple[float, float, str]]:
    rng = np.random.default_rng(1)
    species = ("setosa", "versicolor", "virginica")
    return [
        (round(1 + 3 * (i % 3) + rng.random(), 1), round(3 + rng.random(), 2), species[i % 3]) for i in range(count)
    ]


def table(path: pathlib.Path, rows, header=None, delimiter=",", decimal=".") -> pathlib.Path:
    def cell(value) -> str:
        return str(value).replace(".", decimal) if isinstance(value, float) else str(value)

    lines = ([delimiter.join(header)] if header else []) + [delimiter.join(map(cell, row)) for row in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def as_rows(records: list[dict], names) -> list[tuple]:
    """The records' values of `names`, sorted, each float as float32 held it, to 4 places."""
    return sorted(
        tuple(round(v, 4) if isinstance(v, float) else v.decode() if isinstance(v, bytes) else v for v in values)
        for values in ([r[name] for name in names] for r in records)
    )


def converted_table(tmp_path, source, *extra) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / "out"
    result = run_pipeline(["--kind", "csv", "--input", source, "--output", out, *extra])
    assert result.returncode == 0, result.stderr[-3000:]
    return result, [record for split in load_manifest(out).splits for record in read_split(out, split)]


def test_a_table_without_a_header_keeps_its_first_row_and_names_its_columns(tmp_path):
    rows = iris_rows()
    result, records = converted_table(tmp_path, table(tmp_path / "in" / "iris.csv", rows))
    manifest = load_manifest(tmp_path / "out")
    assert manifest.inputs["columns"] == ["column_1", "column_2", "column_3"]
    assert manifest.inputs["layout"]["header"] is False and "no header row" in result.stdout
    [warning] = manifest.warnings
    assert "no header row" in warning and "column_1 .. column_3" in warning and "csv.columns" in warning
    # every row, the first too, with its numbers as numbers
    assert as_rows(records, ["column_1", "column_2", "column_3"]) == sorted(rows)


def test_the_columns_of_a_table_without_a_header_are_named_by_the_setting(tmp_path):
    source = table(tmp_path / "in" / "iris.csv", iris_rows())
    (tmp_path / "c.yaml").write_text("csv: {columns: [length, width, species]}\n")
    _, records = converted_table(tmp_path, source, "--config", tmp_path / "c.yaml")
    manifest = load_manifest(tmp_path / "out")
    assert manifest.inputs["columns"] == ["length", "width", "species"] and manifest.warnings == ()
    assert len(records) == 30


def test_a_semicolon_table_with_decimal_commas_keeps_its_numbers(tmp_path):
    rows = iris_rows()
    source = table(tmp_path / "in" / "iris.csv", rows, ("length", "width", "species"), ";", ",")
    result, records = converted_table(tmp_path, source)
    manifest = load_manifest(tmp_path / "out")
    assert {name: f.dtype for name, f in manifest.features.items()} == {
        "length": "float32",
        "width": "float32",
        "species": "string",
    }
    assert manifest.warnings == ()
    assert "read as CSV: ';' between fields, ',' before fractions, a header row" in result.stdout
    assert as_rows(records, ["length", "width", "species"]) == sorted(rows)


def test_columns_that_share_a_warning_are_named_in_one_line(tmp_path):
    source = table(tmp_path / "in" / "eu.csv", iris_rows(), ("length", "width", "species"), ";", ",")
    (tmp_path / "c.yaml").write_text('csv: {decimal: "."}\n')
    result, _ = converted_table(tmp_path, source, "--config", tmp_path / "c.yaml")
    warnings = [line for line in result.stdout.splitlines() if line.strip().startswith("warning:")]
    assert len(warnings) == 1 and "columns ['length', 'width'] are stored as strings" in warnings[0]
    assert "set csv.decimal: ','" in warnings[0]


# --- string labels


def test_a_string_label_column_is_stored_as_class_ids_named_in_the_manifest(tmp_path):
    rows = iris_rows()
    source = table(tmp_path / "in" / "iris.csv", rows, ("length", "width", "species"))
    result, records = converted_table(tmp_path, source, "--label", "species")
    manifest = load_manifest(tmp_path / "out")
    assert manifest.label_column == "species" and manifest.label_map == ("setosa", "versicolor", "virginica")
    assert manifest.features["species"].dtype == "int64"
    named = sorted((r["length"], r["width"], manifest.label_map[r["species"]]) for r in records)
    assert [(round(a, 4), round(b, 4), c) for a, b, c in named] == sorted(rows)
    counts = {
        label: sum(s.label_counts.get(label, 0) for s in manifest.splits.values()) for label in manifest.label_map
    }
    assert counts == {"setosa": 10, "versicolor": 10, "virginica": 10}


def test_a_column_named_label_is_the_label_column_and_int_labels_are_their_own_ids(tmp_path):
    source = table(tmp_path / "in" / "t.csv", [(float(i), i % 3) for i in range(12)], ("x", "label"))
    converted_table(tmp_path, source)
    manifest = load_manifest(tmp_path / "out")
    assert (manifest.label_column, manifest.label_map) == ("label", ("0", "1", "2"))
    assert manifest.features["label"].dtype == "int64"


def test_a_float_label_column_is_a_target_without_classes(tmp_path):
    source = table(tmp_path / "in" / "t.csv", [(float(i), i / 7) for i in range(12)], ("x", "y"))
    converted_table(tmp_path, source, "--label", "y")
    manifest = load_manifest(tmp_path / "out")
    assert (manifest.label_column, manifest.label_map, manifest.features["y"].dtype) == ("y", (), "float32")


def test_a_row_without_a_label_is_a_dead_letter(tmp_path):
    source = table(tmp_path / "in" / "t.csv", [(1.5, "cat"), (2.5, ""), (3.5, "dog")] * 10, ("x", "animal"))
    out = tmp_path / "out"
    result = run_pipeline(
        ["--kind", "csv", "--input", source, "--output", out, "--label", "animal", "--max_error_fraction", "0.5"]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    letters = read_dead_letters(out)
    assert len(letters) == 10 and {d["reason"] for d in letters} == {"no value in the label column 'animal'"}
    assert load_manifest(out).label_map == ("cat", "dog")


def test_a_label_column_the_files_lack_is_refused_naming_the_closest(tmp_path):
    source = table(tmp_path / "in" / "t.csv", iris_rows(), ("length", "width", "species"))
    line = one_line_refusal(["--kind", "csv", "--input", source, "--output", tmp_path / "out", "--label", "specie"])
    assert "--label (csv.label) names column 'specie'" in line and "did you mean 'species'?" in line


def test_a_refresh_keeps_the_class_ids_of_a_string_label(tmp_path):
    source = tmp_path / "in"
    table(source / "a.csv", [(1.5, "dog"), (2.5, "cat")] * 5, ("x", "animal"))
    root = tmp_path / "root"
    argv = ["refresh", "--kind", "csv", "--input", source / "*.csv", "--output", root, "--label", "animal"]
    assert run_pipeline(argv).returncode == 0
    table(source / "b.csv", [(3.5, "ant"), (4.5, "cat")] * 5, ("x", "animal"))
    assert run_pipeline(argv).returncode == 0
    latest = root / (root / "LATEST").read_text().strip()
    manifest = load_manifest(latest)
    assert manifest.label_map == ("cat", "dog", "ant")  # the ids of the first version kept, the new class after
    ids = {round(r["x"], 1): r["animal"] for split in manifest.splits for r in read_split(latest, split)}
    assert ids == {1.5: 1, 2.5: 0, 3.5: 2, 4.5: 0}


# --- image CSVs


@pytest.mark.parametrize(
    "header, expected",
    [
        ("filename,label", "its first row ['filename', 'label'] is a header that names no 'image_uri' column"),
        ("file_name,class,split", "is a header that names no 'image_uri' column: set image_csv.uri_column"),
        ("image_uri,cls", "names 'image_uri' but no 'label' column: set image_csv.label_column"),
    ],
)
def test_an_image_csv_whose_header_names_other_columns_is_refused_naming_the_settings(tmp_path, header, expected):
    tree(tmp_path, {"imgs/1.jpg": jpeg(), "imgs/2.jpg": jpeg()})
    columns = header.count(",") + 1
    rows = [",".join(["imgs/1.jpg", "cat", "TRAIN"][:columns]), ",".join(["imgs/2.jpg", "dog", "TEST"][:columns])]
    (tmp_path / "list.csv").write_text("\n".join([header, *rows]) + "\n")
    line = one_line_refusal(["--kind", "image_csv", "--input", tmp_path / "list.csv", "--output", tmp_path / "out"])
    assert expected in line and "(in a --config file)" in line


def test_an_image_csv_with_its_columns_named_in_the_config_converts(tmp_path):
    tree(tmp_path, {"imgs/1.jpg": jpeg(), "imgs/2.jpg": jpeg()})
    (tmp_path / "list.csv").write_text("filename,label\nimgs/1.jpg,cat\nimgs/2.jpg,dog\n")
    (tmp_path / "c.yaml").write_text("image_csv: {uri_column: filename}\n")
    out = tmp_path / "out"
    argv = ["--kind", "image_csv", "--input", tmp_path / "list.csv", "--output", out, "--config", tmp_path / "c.yaml"]
    result = run_pipeline(argv)
    assert result.returncode == 0, result.stderr[-3000:]
    assert load_manifest(out).label_map == ("cat", "dog") and load_manifest(out).records == 2


# --- a dataset one level down, and other readings a run names


@pytest.mark.parametrize("inside", ["train/cat", "cat"])
def test_a_dataset_unpacked_into_a_folder_of_its_own_is_refused_naming_that_folder(tmp_path, inside):
    files = {f"{inside}/{i}.jpg": jpeg() for i in range(2)}
    files.update({f"{inside.replace('cat', 'dog').replace('train', 'val')}/{i}.jpg": jpeg() for i in range(2)})
    source = tree(tmp_path / "download", {f"dataset/{key}": data for key, data in files.items()})
    line = one_line_refusal(["--input", source, "--output", tmp_path / "out"])
    assert "its one folder dataset/ holds" in line and f"give --input {source}/dataset" in line
    result = run_pipeline(["--input", source / "dataset", "--output", tmp_path / "out"])
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_dataset_of_one_class_says_so(tmp_path):
    source = tree(tmp_path / "photos", {f"cat/{i}.jpg": jpeg() for i in range(4)})
    result = run_pipeline(["--input", source, "--output", tmp_path / "out"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the dataset has one class, 'cat': a classifier needs two or more" in result.stdout


@pytest.mark.parametrize("header", ["image_uri,label", "id,caption,path"])
def test_an_image_csv_given_as_a_table_is_refused_naming_the_kind_that_converts_its_images(tmp_path, header):
    tree(tmp_path / "in", {"imgs/1.jpg": jpeg(), "imgs/2.png": jpeg()})
    rows = ["imgs/1.jpg,cat", "imgs/2.png,dog"] if header.startswith("image") else ["1,a cat,imgs/1.jpg", "2,a dog,"]
    (tmp_path / "in" / "list.csv").write_text("\n".join([header, *rows]) + "\n")
    line = one_line_refusal(["--kind", "csv", "--input", tmp_path / "in" / "list.csv", "--output", tmp_path / "out"])
    assert "is a CSV file of image URIs" in line and line.endswith("give --kind image_csv")
