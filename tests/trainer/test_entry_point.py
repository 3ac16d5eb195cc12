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
