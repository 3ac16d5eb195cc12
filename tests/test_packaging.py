"""The project as a user installs it: a wheel built from setup.py, installed into a fresh virtual
environment, used through its console commands (`tfrecord-pipeline`, `tfrecord-train`), from a
folder outside the source tree and without TensorFlow (the `tf` extra is not installed).

How the fresh environment gets its dependencies. A real `pip install` of the wheel resolves and
unpacks apache-beam[gcp] and its ~100 dependencies: 1 min 44 s to 2 min 26 s on the 2-core
development VM, from a local wheel cache, before anything is tested (the whole test then took
~3 min, against ~45 s as below), which this suite cannot afford on every run. So by default:

- the wheel itself is installed by pip into the fresh environment (`--no-deps`): every module of
  the project that runs comes from the wheel, never from the source tree (checked with
  importlib.metadata and `pipeline.__file__` inside the fresh environment);
- its dependencies are the closure of the wheel's own `Requires-Dist` (markers and extras
  evaluated, as pip would, e.g. apache-beam's `gcp` extra), taken as the versions the project's
  environment resolved: each of those distributions' files (its RECORD) is linked into the fresh
  environment's site-packages, dist-info included. Nothing else is there: not TensorFlow (an
  extra), not pytest, not the project's editable install;
- `pip check` in the fresh environment then proves the closure complete: every installed
  distribution's requirements, the wheel's first, are met. A module the code imports without
  declaring it fails the console commands below with a ModuleNotFoundError.

TFRECORD_FULL_INSTALL=1 installs the wheel with a plain `pip install WHEEL` instead (dependencies
resolved and downloaded from the configured index): slower, needs the index, same checks.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import shutil
import subprocess
import sys
import time
import venv
import zipfile

import pytest
from packaging.requirements import Requirement

from core.contract.manifest import FORMAT_VERSION

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("core", "pipeline", "transforms", "trainer")
FULL_INSTALL = os.environ.get("TFRECORD_FULL_INSTALL") == "1"
EXTRA_HINT = "pip install 'tfrecord-pipeline[tf]'"
TIMINGS: dict[str, float] = {}


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    started = time.monotonic()
    kwargs.setdefault("timeout", 900 if FULL_INSTALL else 300)
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, **kwargs)
    words = [pathlib.Path(str(args[0])).name, *(str(a) for a in args[1:] if not str(a).startswith("/"))]
    TIMINGS[" ".join(words)[:100]] = time.monotonic() - started
    return result


def _checked(args, **kwargs) -> subprocess.CompletedProcess:
    result = _run(args, **kwargs)
    assert result.returncode == 0, f"{args}: {result.stdout[-2000:]}{result.stderr[-4000:]}"
    return result


def build_wheel(tmp: pathlib.Path) -> pathlib.Path:
    """setup.py and its packages copied alone into a folder (building there leaves the repo
    clean), built offline with the environment's setuptools."""
    source = tmp / "src"
    source.mkdir()
    shutil.copy(REPO / "setup.py", source)
    for package in PACKAGES:
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    _checked([*pip, "-w", tmp / "dist", source])
    [wheel] = (tmp / "dist").glob("tfrecord_pipeline-*.whl")
    return wheel


def _site_packages(env: pathlib.Path) -> pathlib.Path:
    [site] = (env / "lib").glob("python3*/site-packages")
    return site


def dependency_closure(requirements: list[str], extras: set[str]) -> list[importlib.metadata.Distribution]:
    """The distributions (of this environment) that pip would install for `requirements` with
    `extras` requested: markers evaluated, extras followed, versions checked."""
    found: dict[str, importlib.metadata.Distribution] = {}
    followed: set[tuple[str, str]] = set()  # (distribution, extra or "") whose requirements are queued
    queue = [(Requirement(text), extras) for text in requirements]
    while queue:
        requirement, wanted = queue.pop()
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e}) for e in wanted | {""}):
            continue
        try:
            dist = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{requirement} is required but not installed in {sys.prefix}")
        assert requirement.specifier.contains(dist.version, prereleases=True), f"{requirement}: have {dist.version}"
        key = dist.metadata["Name"].lower().replace("_", "-")
        found[key] = dist
        for extra in {"", *requirement.extras} - {e for k, e in followed if k == key}:
            followed.add((key, extra))
            queue += [(Requirement(text), {extra}) for text in dist.requires or ()]
    return list(found.values())


def link_distribution(dist: importlib.metadata.Distribution, site: pathlib.Path) -> None:
    """Every file the distribution installed into site-packages (its RECORD), linked into `site`."""
    assert dist.files is not None, f"{dist.metadata['Name']}: no RECORD to link from"
    for file in dist.files:
        if file.parts[0] == "..":  # console scripts in bin/: not needed
            continue
        origin = pathlib.Path(dist.locate_file(file))
        target = site / file
        if not origin.exists() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(origin)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("packaging")
    started = time.monotonic()
    wheel = build_wheel(tmp)
    env = tmp / "fresh"
    venv.EnvBuilder(with_pip=FULL_INSTALL, symlinks=True).create(env)
    python = env / "bin" / "python"
    if FULL_INSTALL:
        _checked([python, "-m", "pip", "install", "-q", wheel])
    else:
        _checked([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])
        site = _site_packages(env)
        [ours] = importlib.metadata.distributions(name="tfrecord-pipeline", path=[str(site)])
        for dist in dependency_closure(ours.requires or [], set()):
            link_distribution(dist, site)
    pip_check = [python, "-m", "pip"] if FULL_INSTALL else [sys.executable, "-m", "pip", "--python", python]
    _checked([*pip_check, "check"])
    TIMINGS["install (wheel build to pip check)"] = time.monotonic() - started
    work = tmp / "work"  # where the commands run: no source tree, no sample beside them
    images = work / "tiny"
    for label_dir in sorted((REPO / "sample" / "images").iterdir()):
        (images / label_dir.name).mkdir(parents=True)
        for path in sorted(label_dir.iterdir())[:2]:
            shutil.copy(path, images / label_dir.name / path.name)
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    environ["PATH"] = f"{env / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
    return {"wheel": wheel, "env": env, "python": python, "work": work, "images": images, "environ": environ}


def command(installed, name: str, *args) -> subprocess.CompletedProcess:
    return _run([installed["env"] / "bin" / name, *args], cwd=installed["work"], env=installed["environ"])


def test_the_wheel_holds_the_trainer_the_commands_and_the_extras(installed):
    with zipfile.ZipFile(installed["wheel"]) as zf:
        names = zf.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        requires = [line for line in zf.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
        scripts = zf.read(entry_points).decode()
    assert {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n} == set(PACKAGES)
    assert {"trainer/train.py", "trainer/__main__.py", "core/contract/tf_import.py"} <= set(names)
    assert "core/contract/manifest.schema.json" in names  # setup.py package_data
    assert "tfrecord-pipeline = pipeline.__main__:main" in scripts
    assert "tfrecord-train = trainer.__main__:main" in scripts
    parsed = [Requirement(line.split(":", 1)[1]) for line in requires]
    base = {r.name for r in parsed if not r.marker}  # what every install gets, Dataflow workers included
    tf = {r.name: str(r.specifier) for r in parsed if r.marker and r.marker.evaluate({"extra": "tf"})}
    assert {"apache-beam", "google-crc32c", "google-cloud-storage", "protobuf", "jsonschema"} <= base, base
    assert not base & {"tensorflow", "keras"}, base
    assert tf.get("tensorflow") == "==2.21.0" and "keras" in tf, tf


def test_the_fresh_environment_runs_the_wheel_and_has_no_tensorflow(installed):
    code = (
        "import importlib.metadata as m, importlib.util, pipeline, trainer\n"
        "print(pipeline.__file__); print(trainer.__file__)\n"
        "print(m.distribution('tfrecord-pipeline').locate_file(''))\n"
        "print(importlib.util.find_spec('tensorflow'))\n"
    )
    result = _run([installed["python"], "-c", code], cwd=installed["work"], env=installed["environ"])
    assert result.returncode == 0, result.stderr
    pipeline_file, trainer_file, dist_location, tensorflow = result.stdout.splitlines()
    site = str(_site_packages(installed["env"]))
    assert pipeline_file == f"{site}/pipeline/__init__.py" and trainer_file == f"{site}/trainer/__init__.py"
    assert dist_location == site
    assert tensorflow == "None"


def test_the_installed_package_reads_its_manifest_schema(installed):
    """core.contract.manifest.json_schema() finds the schema in the installed wheel."""
    code = (
        "import core.contract.manifest as m\n"
        "print(m.__file__)\n"
        "print(m.json_schema()['properties']['format_version']['enum'][0])\n"
    )
    result = _run([installed["python"], "-c", code], cwd=installed["work"], env=installed["environ"])
    assert result.returncode == 0, result.stderr[-3000:]
    module, format_version = result.stdout.splitlines()
    assert module == f"{_site_packages(installed['env'])}/core/contract/manifest.py"
    assert format_version == str(FORMAT_VERSION)


def test_tfrecord_pipeline_converts_and_inspects_a_folder(installed):
    out = installed["work"] / "out"
    result = command(installed, "tfrecord-pipeline", "--input", installed["images"], "--output", out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "manifest.json").exists() and f"Dataset written to {out}" in result.stdout
    assert "MB on disk (GZIP)" in result.stdout
    explicit = command(installed, "tfrecord-pipeline", "convert", "--input", installed["images"], "--output", out)
    assert explicit.returncode == 2 and "already holds a dataset" in explicit.stderr  # `convert` named: same command
    inspected = command(installed, "tfrecord-pipeline", "inspect", out)
    assert inspected.returncode == 0, inspected.stderr[-3000:]
    assert "MB on disk (GZIP)" in inspected.stdout and "written 6" in inspected.stdout


def _one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "ModuleNotFoundError" not in result.stderr
    return lines[0]


def test_without_tensorflow_the_commands_that_need_it_name_the_extra(installed):
    out = installed["work"] / "out"
    if not (out / "manifest.json").exists():
        _checked(
            [installed["env"] / "bin" / "tfrecord-pipeline", "--input", installed["images"], "--output", out],
            cwd=installed["work"],
            env=installed["environ"],
        )
    for args in (["--verify"], ["--contact_sheet", str(installed["work"] / "sheet.png")]):
        result = command(installed, "tfrecord-pipeline", "inspect", out, *args)
        assert result.returncode == 2, result.stderr[-3000:]
        line = _one_error_line(result)
        assert "needs TensorFlow, which is not installed" in line and EXTRA_HINT in line, line
        assert result.stdout == ""  # refused before anything was read
    result = command(installed, "tfrecord-train", "--data", out, "--model_dir", installed["work"] / "model")
    assert result.returncode == 2
    line = _one_error_line(result)
    assert line.startswith("error: training needs TensorFlow") and EXTRA_HINT in line, line
    result = command(installed, "tfrecord-train", "--help")  # answered before TensorFlow is needed
    assert result.returncode == 0 and "--model_dir" in result.stdout, result.stderr[-3000:]


def test_without_input_an_installed_copy_asks_for_it(installed):
    result = command(installed, "tfrecord-pipeline")
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "--input is required" in line and "only in a source checkout" in line, line
    assert not (installed["work"] / "output").exists()


def test_python_m_pipeline_runs_from_the_wheel_too(installed):
    result = _run([installed["python"], "-m", "pipeline", "--help"], cwd=installed["work"], env=installed["environ"])
    assert result.returncode == 0 and "--input" in result.stdout, result.stderr[-3000:]


def test_report_timings(installed):
    """Not a check: the durations, printed with -s (the README quotes them)."""
    print("\n".join(f"{seconds:7.1f} s  {what}" for what, seconds in TIMINGS.items()))
