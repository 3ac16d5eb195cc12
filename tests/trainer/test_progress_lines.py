"""The trainer's progress lines (trainer.loop.ProgressLines): one once its first step is done, then
one every --log_every_seconds, with the step of the total, examples, examples/s, loss and the time
left; a compiled loop call is cut short where a line is due sooner."""

from __future__ import annotations

import logging
import re

import pytest

from trainer import train
from trainer.loop import LoopConfig, ProgressLines

TABULAR = ["--label", "label", "--num_classes", "3", "--batch_size", "64", "--features", "x1,x2,x3,count,flag"]
FIRST = re.compile(r"step 1 of ([\d,]+), epoch 1 of \d+: first step done in [\d.]+ s \(with tracing\), loss [\d.]+")
LATER = re.compile(
    r"step ([\d,]+) of ([\d,]+), epoch \d+ of \d+: \d+% done, ([\d,]+) examples, [\d,]+ examples/s, loss [\d.]+"
    r"(, about [\w ]+ left)?"
)


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trainer.loop" and r.getMessage().startswith("step ")]


def _train(dataset, model_dir, *flags: str) -> None:
    argv = ["--data", str(dataset), "--model_dir", str(model_dir), *TABULAR, "--no_export", *flags]
    assert train.main(argv) == 0


def test_the_first_line_comes_with_the_first_step_not_the_first_loop(tabular_dataset, tmp_path, caplog):
    """With 50 steps per compiled loop (the default) and a line every 30 s, a short run still
    says after its first step that it trains, and how long start-up took."""
    caplog.set_level(logging.INFO, "trainer.loop")
    _train(tabular_dataset, tmp_path / "m", "--steps", "30")
    first, *_ = _lines(caplog)
    assert FIRST.fullmatch(first) and FIRST.fullmatch(first).group(1) == "30", first


def test_a_line_every_interval_with_step_examples_rate_loss_and_time_left(tabular_dataset, tmp_path, caplog):
    """A line at every loop call here (an interval of 0 s): each call is then one step."""
    caplog.set_level(logging.INFO, "trainer.loop")
    _train(tabular_dataset, tmp_path / "m", "--steps", "4", "--log_every_seconds", "0")
    first, *later = _lines(caplog)
    assert FIRST.fullmatch(first), first
    found = [LATER.fullmatch(line) for line in later]
    assert all(found), later
    assert [int(m.group(1)) for m in found] == [2, 3, 4]
    assert all(m.group(3) == f"{int(m.group(1)) * 64:,}" for m in found)  # steps x the global batch
    assert [bool(m.group(4)) for m in found] == [True, True, False]  # no time left at the last step


@pytest.mark.parametrize(
    "step_seconds,every_seconds,expected",
    [(None, 30, 1), (0.1, 30, 50), (1.0, 30.5, 30), (5.0, 32, 6), (10.0, 5, 1), (0.1, 0, 1)],
)
def test_a_loop_call_ends_about_when_a_line_is_due(step_seconds, every_seconds, expected):
    """The first call is one step; then at most steps_per_loop (50), at least one, as many as take
    about the time until the next line at the last call's pace."""
    config = LoopConfig("m", 64, 100, 1000, 1, log_every_seconds=every_seconds)
    lines = ProgressLines(config, 0)
    if step_seconds is not None:
        lines.trained(1, 1.0, step_seconds, 1, 0)  # the first call: its line, and the next one due
    assert lines.steps(50) == expected
