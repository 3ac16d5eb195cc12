"""Refusals before any work (exit 2, one line naming the path and the reason), unknown flags, and
exit codes that mean what the README says: 1 rejected, 2 refused, 3 failed while running; no
traceback unless --debug."""

from __future__ import annotations

import importlib
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import pipeline.commands.convert
from pipeline.cli import main
from pipeline.readback import CountShardRecords
from tests.one_line import the_one_line
from tests.subprocess_limits import SUBPROCESS_TIMEOUT, run_pipeline

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample"


@pytest.fixture
def photos(tmp_path):
    root = tmp_path / "photos"
    for label in ("circle", "square"):
        (root / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:2]:
            shutil.copy(path, root / label / path.name)
    return root


def refused(caplog, argv) -> str:
    """The one error line of a command that must exit 2 before any work."""
    assert main([str(a) for a in argv]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert not any("planned" in r.getMessage() for r in caplog.records), "nothing may be read first"
    return errors[0]


def test_a_mistyped_flag_is_refused_with_a_suggestion(photos, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--input", str(photos), "--ouput", str(tmp_path / "out"), "--overwrite"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "unrecognized argument --ouput" in err and "did you mean --output" in err
    assert not (tmp_path / "out").exists()


def test_the_suggestion_names_the_closest_flag(photos, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["refresh", "--input", str(photos), "--output", str(tmp_path / "root"), "--kep", "3"])
    err = capsys.readouterr().err
    assert "unrecognized argument --kep" in err and "did you mean --keep" in err


@pytest.mark.parametrize(
    "kind, make_input, reason",
    [
        ("images", lambda p, t: t / "nothing", "does not exist"),
        ("images", lambda p, t: next((p / "circle").iterdir()), "is an image file (.jpg), which no --kind reads"),
        ("image_csv", lambda p, t: p, "is a folder of class folders; --kind image_csv reads one CSV file"),
        ("csv", lambda p, t: f"{t}/missing/*.csv", "does not exist"),
    ],
)
def test_an_input_that_is_not_there_or_not_its_kind_is_refused(photos, tmp_path, caplog, kind, make_input, reason):
    source = make_input(photos, tmp_path)
    line = refused(caplog, ["--kind", kind, "--input", source, "--output", tmp_path / "out"])
    assert reason in line and str(source).split("*")[0].rstrip("/") in line


def refused_in_a_process(argv) -> str:
    """The error output of a command that must exit 2, run as a process with a time limit: a
    command that waited on its input would hang the suite."""
    result = run_pipeline(argv)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "planned" not in result.stderr, "nothing may be read first"
    return result.stderr


@pytest.mark.parametrize(
    "command, make_input, reason",
    [
        ([], os.mkfifo, "is not a regular file: a FIFO, which no --kind reads"),
        (["refresh"], os.mkfifo, "is not a regular file: a FIFO, which no --kind reads"),
        ([], lambda p: os.symlink("/dev/zero", p), "is not a regular file: a link to /dev/zero, a character device"),
    ],
)
def test_an_image_csv_that_is_a_fifo_or_device_is_refused_not_waited_on(tmp_path, command, make_input, reason):
    """A FIFO's read would wait for a writer forever, /dev/zero's would never end."""
    make_input(tmp_path / "labels.csv")
    argv = [*command, "--kind", "image_csv", "--input", tmp_path / "labels.csv", "--output", tmp_path / "out"]
    assert f"input {tmp_path / 'labels.csv'} {reason}" in refused_in_a_process(argv)


@pytest.mark.parametrize("command", [[], ["refresh"]])
def test_an_image_csv_that_is_a_dangling_link_is_refused_naming_its_target(tmp_path, command):
    os.symlink(tmp_path / "moved.csv", tmp_path / "labels.csv")
    argv = [*command, "--kind", "image_csv", "--input", tmp_path / "labels.csv", "--output", tmp_path / "out"]
    target = tmp_path / "moved.csv"
    assert f"input {tmp_path / 'labels.csv'} is a link to {target}, which does not exist (dangling link)" in (
        refused_in_a_process(argv)
    )


def test_a_single_csv_that_is_a_dangling_link_is_refused_naming_its_target(tmp_path):
    """Beam's matching would find no file there and say no more than that."""
    (tmp_path / "in").mkdir()
    os.symlink("gone.csv", tmp_path / "in/only.csv")
    argv = ["--kind", "csv", "--input", tmp_path / "in/only.csv", "--output", tmp_path / "out"]
    reason = f"a link to {tmp_path / 'in/gone.csv'}, which does not exist (dangling link)"
    assert f"input {tmp_path / 'in/only.csv'} is {reason}" in refused_in_a_process(argv)
    assert not (tmp_path / "out/manifest.json").exists()


def test_a_single_csv_that_is_a_fifo_is_refused_before_the_job(tmp_path):
    (tmp_path / "in").mkdir()
    os.mkfifo(tmp_path / "in/only.csv")
    argv = ["--kind", "csv", "--input", tmp_path / "in/only.csv", "--output", tmp_path / "out"]
    assert f"input {tmp_path / 'in/only.csv'} is not a regular file: a FIFO" in refused_in_a_process(argv)
    assert not (tmp_path / "out/manifest.json").exists()


@pytest.mark.parametrize("command", [[], ["refresh"]])
@pytest.mark.parametrize(
    "make, what",
    [
        (os.mkfifo, "not a regular file: a FIFO"),
        (lambda p: os.symlink("/dev/zero", p), "not a regular file: a link to /dev/zero, a character device"),
    ],
)
def test_a_config_file_that_is_a_fifo_or_device_is_refused_not_waited_on(tmp_path, command, make, what):
    """Read twice before any work (pipeline.unused_modules, before Beam is imported; then the
    command's load_config): neither may wait on a FIFO or read a device."""
    (tmp_path / "in").mkdir()
    make(tmp_path / "settings.yaml")
    argv = [*command, "--config", tmp_path / "settings.yaml", "--input", tmp_path / "in", "--output", tmp_path / "out"]
    errors = [line for line in refused_in_a_process(argv).splitlines() if " ERROR " in line]
    assert len(errors) == 1 and errors[0].endswith(f"cannot read config {tmp_path / 'settings.yaml'}: {what}"), errors


@pytest.mark.parametrize("command", [[], ["refresh"]])
def test_a_config_file_that_is_not_utf8_is_refused_naming_the_byte(tmp_path, command):
    """Read twice before any work, as above: pipeline.unused_modules leaves it to load_config."""
    (tmp_path / "in").mkdir()
    (tmp_path / "settings.yaml").write_bytes(b"kind: images\n\xff\xfe: 1\n")
    argv = [*command, "--config", tmp_path / "settings.yaml", "--input", tmp_path / "in", "--output", tmp_path / "out"]
    stderr = refused_in_a_process(argv)
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    reason = (
        "is not UTF-8 text: byte 0xff at offset 13 (line 2); it is text in another encoding than UTF-8 "
        "(Latin-1 or Windows-1252? save it as UTF-8)"
    )
    assert len(errors) == 1 and errors[0].endswith(f"config {tmp_path / 'settings.yaml'} {reason}"), stderr


def test_an_output_inside_the_input_is_refused(photos, caplog):
    line = refused(caplog, ["--input", photos, "--output", photos / "tfrecords"])
    assert "inside the input" in line and not (photos / "tfrecords").exists()


@pytest.mark.parametrize(
    "pattern, output, inside",
    [
        ("data.csv", "out", False),  # one file: its folder is not read
        ("tables/*.csv", "tables/out", False),  # matches no file below tables/out
        ("tables/**/*.csv", "tables/out", True),
        ("tables/*/*.csv", "tables/out", True),
    ],
)
def test_a_tabular_output_is_refused_only_where_the_pattern_could_read_it(tmp_path, caplog, pattern, output, inside):
    """A pattern reads only what it matches: `--input data.csv --output out` in one folder was
    refused as "inside the input" of the folder holding data.csv."""
    (tmp_path / "tables" / "more").mkdir(parents=True)
    for table in ("data.csv", "tables/a.csv", "tables/more/b.csv"):
        (tmp_path / table).write_text("x,y\n1,2\n3,4\n")
    argv = ["--kind", "csv", "--input", str(tmp_path / pattern), "--output", str(tmp_path / output)]
    if inside:
        line = refused(caplog, argv)
        assert line == (
            f"output {tmp_path / output} is inside the input {tmp_path / pattern}: the run would read its own "
            "output; choose another --output"
        )
    else:
        assert main(argv) == 0, caplog.text


@pytest.mark.parametrize("below", ["", "out", "out/deeper"])
def test_an_output_that_is_a_file_or_below_one_is_refused_naming_the_file(photos, tmp_path, below):
    """Not `.../.lease: File exists` (or `Not a directory`), as taking the output's lease found it."""
    (tmp_path / "a_file").write_text("not a folder")
    output = tmp_path / "a_file" / below if below else tmp_path / "a_file"
    line = the_one_line(refused_in_a_process(["--input", photos, "--output", output])).split(" ERROR pipeline: ")[1]
    if below:
        assert (
            line
            == f"output {output} is below {tmp_path / 'a_file'}, which is a file, not a folder: choose another --output"
        )
    else:
        assert line == f"output {output} is a file, not a folder: choose a folder for --output"
    assert (tmp_path / "a_file").read_text() == "not a folder"


def test_a_missing_bucket_is_refused(gcs_emulator, gcs_bucket, photos, caplog):
    line = refused(caplog, ["--input", photos, "--output", "gs://no-such-bucket-4242/out"])
    assert "bucket gs://no-such-bucket-4242 does not exist" in line
    caplog.clear()
    line = refused(caplog, ["--input", "gs://no-such-bucket-4242/in", "--output", f"gs://{gcs_bucket}/out"])
    assert "bucket gs://no-such-bucket-4242 does not exist" in line


def test_a_job_that_fails_while_running_exits_3_in_one_line(photos, tmp_path, caplog, monkeypatch):
    def fail(self, path):
        raise OSError(f"disk gone while reading {path}")

    monkeypatch.setattr(CountShardRecords, "process", fail)
    assert main(["--input", str(photos), "--output", str(tmp_path / "out")]) == 3
    assert "disk gone while reading" in caplog.text and "Traceback" not in caplog.text
    assert all("\n" not in r.getMessage() for r in caplog.records)


def test_an_unexpected_error_is_one_line_unless_debug(photos, tmp_path, caplog, monkeypatch):
    def boom(config, **_):
        raise RuntimeError("planner exploded\nwith a second line")

    monkeypatch.setattr(pipeline.commands.convert, "make_plan", boom)
    argv = ["--input", str(photos), "--output", str(tmp_path / "out")]
    assert main(argv) == 3
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line.startswith("RuntimeError: planner exploded") and "Traceback" not in caplog.text
    with pytest.raises(RuntimeError, match="planner exploded"):
        main([*argv, "--debug"])


def refused_csv(tmp_path, caplog, name: str, data: bytes) -> str:
    """The one error line of a tabular run over one CSV file `name` holding `data`, which must exit 2."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes(data)
    pattern = str(tmp_path / "in" / ("*" + name[name.index(".") :]))
    assert main(["--kind", "csv", "--input", pattern, "--output", str(tmp_path / "out")]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    return line


def test_a_first_csv_whose_header_cannot_be_read_is_refused(tmp_path, caplog):
    import gzip

    data = gzip.compress(b"id,x\n1,2\n" * 1000)
    line = refused_csv(tmp_path, caplog, "a.csv.gz", data[:12])  # cut inside the GZIP header's stream
    assert "a.csv.gz: cannot read its header" in line


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path, caplog):
    """Each column is the feature of its name: of two named alike, one would be lost without a word."""
    line = refused_csv(tmp_path, caplog, "a.csv", b"a,b,a,c,b\n1,2,3,4,5\n")
    assert line.endswith(
        "a.csv: its header names column(s) ['a', 'b'] more than once; each column is the "
        "feature of its name, so all but one of them would be lost: rename them"
    )
    assert not (tmp_path / "out").exists()  # the lease made the folder, and took it away


def test_a_csv_header_with_a_column_without_a_name_is_refused(tmp_path, caplog):
    """pandas' to_csv writes its index under an empty name: a feature keyed "" that no reader asked for."""
    line = refused_csv(tmp_path, caplog, "a.csv", b",a, ,b\n0,1,2,3\n")
    assert line.endswith(
        "a.csv: its header leaves column(s) [1, 3] (counting from 1) without a name, which every column needs as its "
        "feature's key (a pandas index, written by to_csv without index=False?): name them, or write the files "
        "without them"
    )


def test_a_run_refused_after_taking_its_lease_leaves_no_output_folder(tmp_path, caplog):
    (tmp_path / "empty" / "circle").mkdir(parents=True)
    output = tmp_path / "datasets" / "new"
    assert main(["--input", str(tmp_path / "empty"), "--output", str(output)]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line.startswith("no images in class folders below")
    assert not (tmp_path / "datasets").exists()


def test_a_pattern_that_matches_only_hidden_csvs_is_refused_saying_so(tmp_path, caplog):
    (tmp_path / "in" / ".ipynb_checkpoints").mkdir(parents=True)
    (tmp_path / "in" / ".ipynb_checkpoints" / "a-checkpoint.csv").write_text("a\n1\n")
    pattern = str(tmp_path / "in" / "**" / "*.csv")
    assert main(["--kind", "csv", "--input", pattern, "--output", str(tmp_path / "out")]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    hidden = tmp_path / "in" / ".ipynb_checkpoints" / "a-checkpoint.csv"
    assert line == f"no CSV files match {pattern}; hidden files are left out: 1, such as {hidden}"


def test_every_entry_point_ends_an_unexpected_error_in_one_line(caplog):
    """`python -m pipeline.dataflow` goes through the same `run` as `python -m pipeline`."""
    from pipeline.cli import run

    def crash(argv):
        raise KeyError(f"settings lost {argv}")

    assert run(crash, ["get"]) == 3
    assert "KeyError: \"settings lost ['get']\"" in caplog.text and "Traceback" not in caplog.text
    with pytest.raises(KeyError):
        run(crash, ["get", "--debug"])


@pytest.mark.parametrize("module, usage", [("convert", ""), ("refresh", " refresh"), ("inspect", " inspect")])
def test_usage_names_the_command_as_it_was_called(monkeypatch, module, usage):
    parser = importlib.import_module(f"pipeline.commands.{module}").parser
    monkeypatch.setattr(sys, "argv", ["/venv/bin/tfrecord-pipeline"])
    assert parser().format_usage().startswith(f"usage: tfrecord-pipeline{usage} ")
    monkeypatch.setattr(sys, "argv", ["/repo/pipeline/__main__.py"])
    assert parser().format_usage().startswith(f"usage: python -m pipeline{usage} ")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--splits", "train:0.8,validation:0.2"], "argument --splits: expected name=fraction,... got"),
        (["--num_shards", "abc"], "argument --num_shards: invalid int value: 'abc'"),
        (["--kind", "CSV"], "argument --kind: invalid choice: 'CSV'"),
        (["--dry_run"], "Beam's argument --dry_run: expected one argument"),
        (["--direct_num_workers=x"], "Beam's argument --direct_num_workers: invalid int value: 'x'"),
        (["--ouput", "x"], "unrecognized argument --ouput (neither a flag of ours nor a Beam option); did you mean"),
    ],
)
def test_a_flag_that_does_not_parse_is_one_line_without_the_usage_block(photos, tmp_path, argv, says):
    """argparse prints its usage block first (Beam's: a hundred lines of every option it has)."""
    result = run_pipeline(["--input", photos, "--output", tmp_path / "out", *argv])
    assert result.returncode == 2
    line = the_one_line(result.stderr)
    assert line.startswith("python -m pipeline: error: ") and says in line, line
    assert line.endswith("(python -m pipeline --help lists the flags)")


def test_an_inspect_flag_that_does_not_parse_is_one_line(tmp_path):
    result = run_pipeline(["inspect", tmp_path, "--samples", "x"])
    assert result.returncode == 2
    assert "python -m pipeline inspect: error: argument --samples: invalid int value" in the_one_line(result.stderr)


@pytest.mark.parametrize("command", [[], ["refresh"]])
def test_a_runner_that_beam_does_not_know_is_refused_before_any_work(photos, tmp_path, command):
    """Beam says so only once the job is built, after the input was planned (exit 3)."""
    argv = [*command, "--input", photos, "--output", tmp_path / "out", "--runner", "DataflowRuner"]
    line = the_one_line(refused_in_a_process(argv))
    assert "--runner DataflowRuner is no runner Beam knows: did you mean DataflowRunner" in line
    assert not (tmp_path / "out").exists()


def test_options_the_runner_lacks_are_named_not_cut_at_the_first_line(photos, tmp_path):
    """Beam's error puts each missing option on a line of its own after "Pipeline has validations
    errors:", which a one-line log record would have cut away."""
    result = run_pipeline(["--input", photos, "--output", tmp_path / "out", "--runner", "DataflowRunner"])
    assert result.returncode == 3
    line = the_one_line(result.stderr)
    assert "Pipeline has validations errors: Missing GCS path option: temp_location" in line
    assert "Missing required option: project" in line


REPO = SAMPLE.parent


@pytest.mark.parametrize("command", [[], ["inspect", "out"], ["refresh", "--input", "x", "--output", "y"]])
def test_a_python_without_the_projects_packages_is_told_in_one_line_how_to_get_them(tmp_path, command):
    """`python3 -m pipeline` in a checkout, outside its environment: this Python without its
    site-packages (-S) has none of Beam, pydantic or PyYAML, as a system Python may not."""
    result = subprocess.run(
        [sys.executable, "-S", "-m", "pipeline", *command],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 2 and result.stdout == ""
    line = the_one_line(result.stderr)
    assert line.startswith(f"python -m pipeline: error: this Python ({sys.executable}) has no apache-beam, ")
    assert f"source {REPO}/.venv/bin/activate" in line and f"pip install {REPO}" in line


def test_the_trainer_without_tensorflow_says_so_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-S", "-m", "trainer", "--data", tmp_path, "--model_dir", tmp_path / "m"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 2
    assert the_one_line(result.stderr).startswith(
        "error: training needs TensorFlow, which is not installed: pip install"
    )


@pytest.mark.parametrize(
    "argv, says",
    [
        (
            ["--input", "s3://bucket/photos"],
            "input s3://bucket/photos: s3:// is not read or written here, only local paths and gs://: copy the data",
        ),
        (
            ["--kind", "image_csv", "--input", "https://example.com/labels.csv"],
            "input https://example.com/labels.csv: https:// is not read or written here",
        ),
        (["--output", "s3://bucket/out"], "output s3://bucket/out: s3:// is not read or written here"),
        (["--input", "~/photos"], "photos does not exist (~ here names a folder called ~, not your home folder"),
    ],
)
def test_an_input_or_output_no_storage_here_reads_is_one_line_saying_so(photos, tmp_path, argv, says):
    """s3:// and https:// were taken for gs:// ("cannot reach GCS to look at gs://:"), and a quoted
    ~ for a folder that does not exist without a word on why."""
    defaults = {"--input": str(photos), "--output": str(tmp_path / "out")}
    given = dict(zip(argv[::2], argv[1::2], strict=True))
    result = run_pipeline([*(a for pair in {**defaults, **given}.items() for a in pair)], cwd=tmp_path)
    assert result.returncode == 2
    assert says in the_one_line(result.stderr)


def test_gcs_without_credentials_names_how_to_give_them(photos, tmp_path):
    no_credentials = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GOOGLE_", "STORAGE_EMULATOR", "CLOUDSDK_", "GCLOUD"))
    }
    no_credentials.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), NO_GCE_CHECK="True")
    result = run_pipeline(["--input", "gs://some-bucket/photos", "--output", tmp_path / "out"], env=no_credentials)
    assert result.returncode == 2
    line = the_one_line(result.stderr)
    assert "cannot reach GCS to look at gs://some-bucket: DefaultCredentialsError: " in line
    assert line.endswith(
        "(give this machine credentials: gcloud auth application-default login, or "
        "GOOGLE_APPLICATION_CREDENTIALS naming a service account's key file)"
    )


def test_inspect_of_a_folder_that_does_not_exist_says_so(tmp_path):
    result = run_pipeline(["inspect", tmp_path / "nothing"])
    assert result.returncode == 2 and the_one_line(result.stderr) == f"error: {tmp_path / 'nothing'} does not exist"


def test_a_config_file_that_does_not_exist_is_said_so_once(photos, tmp_path, caplog):
    line = refused(caplog, ["--input", photos, "--output", tmp_path / "out", "--config", tmp_path / "nothere.yaml"])
    assert line == f"cannot read config {tmp_path / 'nothere.yaml'}: No such file or directory"


def test_a_split_name_that_looks_like_a_typo_is_warned_of(photos, tmp_path, caplog):
    argv = ["--input", str(photos), "--output", str(tmp_path / "out"), "--splits", "train=0.8,valdation=0.2"]
    assert main(argv) == 0
    [warning] = [r.getMessage() for r in caplog.records if "--splits" in r.getMessage()]
    assert warning == (
        "split 'valdation' (--splits) is not 'validation': a typo? readers and the trainer look for validation-* "
        "by default"
    )


def test_class_folders_without_images_name_the_extensions_they_hold(tmp_path, caplog):
    for name in ("cat/a.heic", "cat/b.heic", "dog/c.HEIC", "dog/notes.txt"):
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / name).write_bytes(b"x")
    line = refused(caplog, ["--input", tmp_path / "in", "--output", tmp_path / "out"])
    assert line.startswith(
        f"no images in class folders below {tmp_path / 'in'} (4 file(s) listed, by extension: .heic 3, .txt 1; the "
        "image extensions read, image.extensions in a --config file: .jpg .jpeg"
    )
