"""The trainer's command line (`python -m trainer`, `tfrecord-train`): an error it did not expect
ends in one line and exit 3, as `python -m pipeline` does; `--debug` shows the traceback."""

from __future__ import annotations

import pytest

from trainer import train
from trainer.__main__ import main


def _fail(args, on_epoch=None):
    raise RuntimeError("something nobody foresaw\nwith a second line")


def test_an_unexpected_error_is_one_line_and_exit_3(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(train, "run", _fail)
    assert main(["--data", str(tmp_path), "--model_dir", str(tmp_path / "m")]) == train.EXIT_UNEXPECTED == 3
    err = capsys.readouterr().err
    assert err == "error: RuntimeError: something nobody foresaw (--debug for the traceback)\n"


def test_debug_shows_the_traceback(monkeypatch, tmp_path):
    monkeypatch.setattr(train, "run", _fail)
    with pytest.raises(RuntimeError, match="nobody foresaw"):
        main(["--data", str(tmp_path), "--model_dir", str(tmp_path / "m"), "--debug"])


def test_a_failure_of_tensorflow_on_the_data_names_its_cause(image_dataset, tmp_path, capsys):
    """TensorFlow's message opens with "Graph execution error:" and the node's Python stack: the
    line says what went wrong instead (here a shard damaged after its conversion), exit 1."""
    import json
    import shutil

    data = shutil.copytree(image_dataset, tmp_path / "data")
    shard = data / json.loads((data / "manifest.json").read_text())["splits"]["train"]["shards"][0]
    damaged = bytearray(shard.read_bytes())
    middle = len(damaged) // 2
    damaged[middle : middle + 2000] = bytes(b ^ 0x5A for b in damaged[middle : middle + 2000])
    shard.write_bytes(bytes(damaged))
    argv = ["--data", str(data), "--model_dir", str(tmp_path / "m"), "--image_size", "16", "--batch_size", "16"]
    assert main([*argv, "--epochs", "1", "--no_export"]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Graph execution error" not in errors[0], errors
    # Which check meets the damage first depends on the bytes there (records are in random order):
    # a record's CRC, or the GZIP stream's inflate.
    assert errors[0].startswith(("error: DataLossError: corrupted record at ", "error: DataLossError: inflate()")), (
        errors[0]
    )
