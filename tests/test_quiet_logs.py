"""The commands that import TensorFlow (`inspect --verify`, the trainer) start quietly on a CPU
machine: none of the CUDA, oneDNN, CPU-feature or absl start-up lines, whatever else they print
(core.contract.tf_import). Without TensorFlow they say in one line which extra to install."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from core.contract import tf_import
from pipeline.cli import main as pipeline_main
from pipeline.commands import inspect
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[1]

# What TensorFlow 2.21 writes at start-up on this CPU VM unless filtered (README, Quiet logs).
NOISE = re.compile(
    r"absl::InitializeLog|cudart_stub|cuInit|cuda_platform|cpu_feature_guard|To enable the following instructions"
    r"|oneDNN|TF-TRT|Unable to register cu|INFO:tensorflow"
    r"|^[IWEF]\d{4} \d\d:\d\d:\d\d"  # absl's C++ log prefix
    r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ",  # TensorFlow's own C++ log prefix
    re.MULTILINE,
)


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != tf_import.LOG_LEVEL_VARIABLE}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=_environ(), timeout=SUBPROCESS_TIMEOUT, check=False
    )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("quiet")
    source, out = tmp / "in", tmp / "out"
    for label_dir in sorted((REPO / "sample" / "images").iterdir()):
        (source / label_dir.name).mkdir(parents=True)
        for path in sorted(label_dir.iterdir())[:2]:
            shutil.copy(path, source / label_dir.name / path.name)
    assert pipeline_main(["--input", str(source), "--output", str(out)]) == 0
    return str(out)


def test_inspect_verify_prints_no_start_up_noise(dataset):
    result = _run("-m", "pipeline", "inspect", dataset, "--verify")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "verify OK" in result.stdout
    assert not NOISE.findall(result.stderr), result.stderr


def test_the_trainer_prints_no_start_up_noise(dataset, tmp_path):
    result = _run("-m", "trainer", "--help")
    assert result.returncode == 0 and "--data" in result.stdout
    assert not NOISE.findall(result.stderr), result.stderr
    # Past the import too: TensorFlow reads the manifest (tf.io.gfile) and refuses a missing split.
    result = _run("-m", "trainer", "--data", dataset, "--model_dir", str(tmp_path / "m"), "--train_split", "nope")
    assert result.returncode == 2, result.stderr[-3000:]
    assert not NOISE.findall(result.stderr), result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: the manifest has no 'nope' split")


def test_only_the_start_up_noise_is_filtered(capfd):
    """Everything written to stderr while TensorFlow loads is passed on, but the known noise."""
    with tf_import._start_up_noise_filtered():
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
        os.write(2, b"I0000 00:00:1795434518.090238   25109 cudart_stub.cc:31] Could not find cuda drivers on ...\n")
        os.write(2, b"E0000 00:00:1795434521.495576   25109 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n")
        os.write(2, b"E0000 00:00:1795434521.495576   25109 something.cc:1] a real problem\n")
        print("a Python warning", file=sys.stderr)
    # (in order on a terminal; pytest's capture takes sys.stderr's line by another way)
    lines = sorted(capfd.readouterr().err.splitlines())
    assert lines == ["E0000 00:00:1795434521.495576   25109 something.cc:1] a real problem", "a Python warning"]


def test_a_log_level_the_user_set_is_left_alone(monkeypatch):
    monkeypatch.setenv(tf_import.LOG_LEVEL_VARIABLE, "0")
    tf_import.import_tensorflow()
    assert os.environ[tf_import.LOG_LEVEL_VARIABLE] == "0"


def test_without_tensorflow_one_line_names_the_extra(monkeypatch, capsys, dataset):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # `import tensorflow` raises ModuleNotFoundError
    with pytest.raises(tf_import.TensorFlowMissingError, match=re.escape(tf_import.INSTALL_HINT)):
        tf_import.import_tensorflow("inspect --verify")
    assert inspect.main([dataset, "--verify"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("error: inspect --verify needs TensorFlow") and "tfrecord-pipeline[tf]" in err

    from trainer.__main__ import main as trainer_main

    assert trainer_main(["--data", "unused", "--model_dir", "unused"]) == 2
    assert capsys.readouterr().err.startswith("error: training needs TensorFlow")
