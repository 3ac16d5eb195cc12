"""Every user-controlled string a command prints (file, folder and label names, column names,
split names, a manifest's warnings) goes through one escaper, core.shown.printable: no control
or format character reaches the terminal, and no newline in a name forges a line.

The scan: nothing in core/, pipeline/, transforms/ or trainer/ writes to the terminal but
core.shown.show (which escapes each line it is given) and the log handlers that
core.shown.printing gives its formatter (which escapes each record's message whole); the few
writes that carry no user text are ALLOWED, each for its reason.

The generated cases: class folders, image files, CSV column names and labels named with every
kind of character a terminal acts on (C0 and C1 controls, escape sequences, carriage returns,
line and paragraph separators, bidi overrides, zero-width characters) among ordinary ones (é,
中文): `convert`, its rejection report and `inspect`, each run as a process, print exactly as
many lines as they do for plain names, none holding a character that is not printable.
"""

from __future__ import annotations

import csv
import logging
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.shown import printable, printing, quoted, show
from tests.code_scan import calls
from tests.subprocess_limits import run_pipeline, run_trainer
from tests.test_publication import SAMPLE

# Writes to the terminal, by the name they are made by.
TERMINAL_WRITES = frozenset({"print", "sys.stdout.write", "sys.stderr.write", "os.write"})
# (module, function): why it may write to the terminal itself.
ALLOWED = {
    ("pipeline.shard_check", ""): "a counting process's JSON line to its parent, not a terminal",
    ("core.contract.tf_import", "_start_up_noise_filtered"): "TensorFlow's own start-up lines, passed on",
    ("transforms.part_appender", "PartAppender.append"): "writes records into a part file (os.write on its fd)",
}


def test_nothing_writes_to_the_terminal_but_show():
    found = {(c.module, c.function): c for c in calls() if c.name in TERMINAL_WRITES}
    bypasses = sorted(c.site for key, c in found.items() if key not in ALLOWED)
    assert not bypasses, "writes to the terminal without core.shown.show:\n" + "\n".join(bypasses)
    assert not sorted(key for key in ALLOWED if key not in found), "allowed, but they write nothing"


def test_every_log_handler_escapes_what_it_writes():
    """Handlers are set up by logging.basicConfig only, each made by core.shown.printing; no
    other formatter is set."""
    configs = [c for c in calls() if c.name == "logging.basicConfig"]
    assert configs, "no command sets up logging"
    for config in configs:
        handlers = config.keyword("handlers")
        assert handlers is not None and handlers.elts, config.site
        assert all(getattr(h.func, "id", None) == "printing" for h in handlers.elts), config.site
    others = [c.site for c in calls() if c.name.endswith((".setFormatter", ".addHandler")) and c.module != "core.shown"]
    assert not others, others


CONTROLS = [
    "\n",
    "\r",
    "\r\n",
    "\t",
    "\x07",
    "\x08",
    "\x0b",
    "\x0c",
    "\x1b[2J",
    "\x1b[31m",
    "\x1b]0;owned\x07",
    "\x7f",
    "\x85",
    "\x9b",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\xa0",
]
ORDINARY = ["a", "é", "中文", "b c", "Ω"]
PARTS = st.lists(st.sampled_from(CONTROLS + ORDINARY), min_size=1, max_size=5).map("".join)


def _numbered(parts: list[str]) -> list[str]:
    """Names made of `parts`, told apart by a number and ending in a letter: labels that differ
    only in spaces or case, and column names with spaces around them, are warned of, which would
    add a line."""
    return [f"n{i}{part}z" for i, part in enumerate(parts)]


@given(st.text())
def test_printable_leaves_one_line_of_printable_characters_and_ordinary_text_as_it_is(text):
    shown = printable(text)
    assert shown.isprintable()
    assert printable(shown) == shown
    if text.isprintable():
        assert shown == text


def test_printable_writes_escapes_as_repr_does_and_a_non_utf8_byte_as_itself():
    assert printable("a\nb\x1b[2J\u202e é 中文") == "a\\nb\\x1b[2J\\u202e é 中文"
    assert printable(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\\xe9"


def test_show_and_the_log_formatter_write_one_line_each(capsys):
    show("x\ny", "\x1b[2Jz")
    assert capsys.readouterr().out == "x\\ny\n\\x1b[2Jz\n"
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, "cannot read %s", ("a\nb\u202e",), None)
    line = printing(logging.StreamHandler()).format(record)
    assert line.endswith("ERROR t: cannot read a\\nb\\u202e") and "\n" not in line


def _lines(result) -> tuple[list[str], list[str]]:
    return result.stdout.splitlines(), result.stderr.splitlines()


def _all_printable(result) -> None:
    for line in result.stdout.splitlines() + result.stderr.splitlines():
        assert line.isprintable(), repr(line)


def _class_folders(root: pathlib.Path, names: list[str]) -> pathlib.Path:
    """Two class folders named by `names[0]`, `names[1]`, each of three images named by the rest,
    and a file that is not an image, so the first errors name it."""
    images = sorted((SAMPLE / "circle").iterdir())[:3]
    folder = root / f"in{names[0]}"
    for label in names[:2]:
        (folder / label).mkdir(parents=True)
        for i, image in enumerate(images):
            shutil.copy(image, folder / label / f"{names[(i + 2) % len(names)]}{i}.jpg")
    (folder / names[0] / f"{names[-1]}.jpg").write_bytes(b"not an image")
    return folder


def _runs(folder: pathlib.Path, out: pathlib.Path) -> list:
    """convert (published), convert rejected (its report), inspect: the processes that print."""
    converted = run_pipeline(
        ["--input", folder, "--output", out, "--splits", "train=1.0", "--max_error_fraction", "0.5"]
    )
    rejected = run_pipeline(["--input", folder, "--output", out.with_name("rejected"), "--splits", "train=1.0"])
    inspected = run_pipeline(["inspect", out])
    assert (converted.returncode, rejected.returncode, inspected.returncode) == (0, 1, 0), converted.stderr
    return [converted, rejected, inspected]


@pytest.fixture(scope="module")
def plain_runs(tmp_path_factory):
    return [
        _lines(r)
        for r in _runs(
            _class_folders(tmp_path_factory.mktemp("plain"), ["p0", "p1", "p2"]),
            tmp_path_factory.mktemp("plain_out") / "out",
        )
    ]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(PARTS, min_size=3, max_size=3).map(_numbered))
def test_names_with_control_characters_never_forge_a_line_or_reach_the_terminal(plain_runs, tmp_path_factory, names):
    tmp = tmp_path_factory.mktemp("names")
    runs = _runs(_class_folders(tmp, names), tmp / "out")
    for run, plain in zip(runs, plain_runs, strict=True):
        _all_printable(run)
        assert [len(lines) for lines in _lines(run)] == [len(lines) for lines in plain], run.stdout + run.stderr
    assert printable(names[0]) in runs[2].stdout  # the label, escaped, in inspect's table


def test_a_newline_an_escape_sequence_and_a_bidi_override_show_escaped_in_the_summary_and_inspect(tmp_path):
    """The named case: class folders and a file named with each, run as processes."""
    names = ["a\nb", "c\x1b[2Jd", "e\u202ef"]
    folder = _class_folders(tmp_path, names)
    converted, rejected, inspected = _runs(folder, tmp_path / "out")
    broken = f"{folder}/{names[0]}/{names[2]}.jpg"  # the file that is not an image: the first errors name it
    assert printable(broken) == f"{tmp_path}/ina\\nb/a\\nb/e\\u202ef.jpg"
    for run in (converted, rejected, inspected):
        assert any(printable(broken) in line for line in run.stdout.splitlines()), run.stdout
        assert not any(character in run.stdout + run.stderr for character in "\x1b\u202e\r"), run.stdout
    labels = [line for line in inspected.stdout.splitlines() if "a\\nb" in line or "c\\x1b[2Jd" in line]
    assert labels, inspected.stdout


def _table(folder: pathlib.Path, columns: list[str], labels: list[str]) -> pathlib.Path:
    """A CSV whose column names and labels are given: a column of numbers but for one value,
    which the manifest warns of, naming the column and the value."""
    folder.mkdir(parents=True)
    with open(folder / "t.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*columns, "label"])
        for i in range(40):
            writer.writerow([str(i) if i != 7 else labels[0], str(i * 2), labels[i % len(labels)]])
    (folder / "settings.yaml").write_text('csv: {delimiter: ",", header: true}\n', encoding="utf-8")
    return folder


def _table_runs(folder: pathlib.Path, out: pathlib.Path) -> list:
    argv = ["--kind", "csv", "--input", folder / "t.csv", "--config", folder / "settings.yaml", "--splits", "train=1.0"]
    converted = run_pipeline([*argv, "--output", out])
    inspected = run_pipeline(["inspect", out])
    assert (converted.returncode, inspected.returncode) == (0, 0), converted.stderr
    return [converted, inspected]


@pytest.fixture(scope="module")
def plain_table_runs(tmp_path_factory):
    folder = _table(tmp_path_factory.mktemp("plain_table") / "t", ["c0", "c1"], ["l0", "l1", "l2"])
    return [_lines(r) for r in _table_runs(folder, folder.parent / "out")]


# A CSV's column names and labels: a delimiter or a BOM would change how the table is read, not shown.
TABLE_PARTS = st.lists(
    st.sampled_from([c for c in CONTROLS if c not in ("\t", "\ufeff")] + ORDINARY), min_size=1, max_size=4
).map("".join)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(TABLE_PARTS, min_size=5, max_size=5).map(_numbered))
def test_column_names_and_labels_with_control_characters_never_forge_a_line(plain_table_runs, tmp_path_factory, names):
    folder = _table(tmp_path_factory.mktemp("table") / "t", names[:2], names[2:])
    runs = _table_runs(folder, folder.parent / "out")
    for run, plain in zip(runs, plain_table_runs, strict=True):
        _all_printable(run)
        assert [len(lines) for lines in _lines(run)] == [len(lines) for lines in plain], run.stdout + run.stderr
    assert quoted(names[0]) in runs[1].stdout  # the column's warning quotes its name


def test_the_trainers_lines_are_printable_whatever_the_dataset_is_called(tmp_path):
    """The dataset folder's name reaches the trainer's log lines and its summary."""
    data = tmp_path / "data\n\x1b[2J\u202e"
    converted = run_pipeline(["--input", SAMPLE, "--output", data])
    assert converted.returncode == 0, converted.stderr
    model_dir = tmp_path / "model"
    argv = ["--data", data, "--model_dir", model_dir, "--epochs", "1", "--batch_size", "32", "--image_size", "8"]
    trained = run_trainer([*argv, "--train_crop", "none"])
    assert trained.returncode == 0, trained.stderr
    _all_printable(trained)
    assert any(line.startswith("Trained ") and printable(str(data)) in line for line in trained.stdout.splitlines())
