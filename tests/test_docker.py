"""The images, checked statically (no Docker engine here): each Dockerfile parses, pins the versions
setup.py pins, installs the project, has the right entrypoint; the Flex Template metadata lists
exactly the flags the pipeline accepts; the template entry point runs the pipeline the way the
launcher calls it."""

from __future__ import annotations

import fnmatch
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

from core.contract.versions import LATEST_NAME
from pipeline.commands import convert, refresh
from pipeline.dataflow.flex_template import template_argv, template_metadata, template_parameters
from pipeline.flags import COMMAND_FLAGS, Flag, split_fractions
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
INSTRUCTIONS = {
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
    "MAINTAINER",
}
JSON_FORM = {"CMD", "ENTRYPOINT", "SHELL", "RUN", "COPY", "ADD", "VOLUME"}


# -- a small Dockerfile parser ----------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    @property
    def words(self) -> list[str]:
        if self.args.startswith("[") and self.keyword in JSON_FORM:
            return json.loads(self.args)
        return shlex.split(self.args, comments=False, posix=True)


@dataclass
class Dockerfile:
    instructions: list[Instruction]
    args: dict[str, str]  # ARG defaults, all stages
    env: dict[str, str]  # ENV of the last stage, substituted

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def substitute(self, text: str) -> str:
        values = {**self.args, **self.env}
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)

    @property
    def base_image(self) -> str:
        return self.substitute(self.all("FROM")[-1].words[0])

    def run_text(self) -> str:
        return "\n".join(self.substitute(i.args) for i in self.all("RUN"))

    def copied(self) -> dict[str, str]:
        """{destination in the image: source in the build context} of every COPY."""
        workdir, out = "/", {}
        for i in self.instructions:
            if i.keyword == "WORKDIR":
                workdir = os.path.join(workdir, self.substitute(i.words[0]))
            elif i.keyword == "COPY":
                *sources, dest = [w for w in i.words if not w.startswith("--")]
                dest = os.path.join(workdir, dest)
                for source in sources:
                    target = (
                        os.path.join(dest, os.path.basename(source.rstrip("/")))
                        if dest.endswith("/") and not source.endswith("/")
                        else dest
                    )
                    out[os.path.normpath(target)] = source
        return out


class DockerfileError(ValueError):
    pass


def parse_dockerfile(path: pathlib.Path) -> Dockerfile:
    logical, start, current = [], 0, ""
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped by Docker
        if not current:
            start = number
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append((start, current + stripped))
        current = ""
    if current:
        raise DockerfileError(f"{path}: line {start}: continuation at the end of the file")
    instructions, args, env = [], {}, {}
    for number, text in logical:
        keyword, _, rest = text.partition(" ")
        keyword = keyword.upper()
        if keyword not in INSTRUCTIONS:
            raise DockerfileError(f"{path}:{number}: unknown instruction {keyword}")
        if not rest.strip():
            raise DockerfileError(f"{path}:{number}: {keyword} without arguments")
        instruction = Instruction(keyword, rest.strip(), number)
        if instruction.args.startswith("[") and keyword in JSON_FORM:
            try:
                words = json.loads(instruction.args)
            except json.JSONDecodeError as e:
                raise DockerfileError(f"{path}:{number}: bad JSON form: {e}") from e
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise DockerfileError(f"{path}:{number}: JSON form must be a list of strings")
        instructions.append(instruction)
        if keyword == "ARG":
            name, _, default = instruction.args.partition("=")
            args.setdefault(name, default)
        elif keyword == "FROM":
            env = {}
        elif keyword == "ENV":
            words = instruction.words
            pairs = [w.partition("=") for w in words] if "=" in words[0] else [(words[0], "=", " ".join(words[1:]))]
            for name, _, value in pairs:
                env[name] = Dockerfile(instructions, args, env).substitute(value)
    first = next((i for i in instructions if i.keyword != "ARG"), None)
    if first is None or first.keyword != "FROM":
        raise DockerfileError(f"{path}: the first instruction after the ARGs must be FROM")
    return Dockerfile(instructions, args, env)


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether a .dockerignore excludes `path` (the last matching pattern wins; a pattern also
    matches everything below a folder it matches)."""
    result = False
    for pattern in (p.strip() for p in patterns):
        if not pattern or pattern.startswith("#"):
            continue
        negated, pattern = pattern.startswith("!"), pattern.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(
            fnmatch.fnmatch(p, pattern)
            or (pattern.startswith("**/") and fnmatch.fnmatch(p.split("/")[-1], pattern[3:]))
            for p in prefixes
        ):
            result = not negated
    return result


def setup_pins() -> dict[str, str]:
    text = (REPO / "setup.py").read_text()
    return {
        "beam": re.search(r'"apache-beam\[gcp\]==([\d.]+)"', text).group(1),
        "tensorflow": set(re.findall(r'"tensorflow==([\d.]+)"', text)).pop(),
        "jsonschema": re.search(r'JSONSCHEMA = "([^"]+)"', text).group(1),
        "python_requires": re.search(r'python_requires=">=(\d+)\.(\d+)"', text).groups(),
    }


@pytest.fixture(scope="module")
def dockerfiles() -> dict[str, Dockerfile]:
    return {name: parse_dockerfile(DOCKER / f"{name}.Dockerfile") for name in ("worker", "launcher", "training")}


# -- tests -----------------------------------------------------------------------------------------


def test_the_parser_rejects_broken_dockerfiles(tmp_path):
    for text in ("RUN echo\n", "FROM x\nRUNN echo\n", 'FROM x\nENTRYPOINT ["a",\n', "FROM x\nRUN a \\\n"):
        (tmp_path / "Dockerfile").write_text(text)
        with pytest.raises(DockerfileError):
            parse_dockerfile(tmp_path / "Dockerfile")


def test_every_dockerfile_parses_and_copies_files_that_exist(dockerfiles):
    for name, dockerfile in dockerfiles.items():
        assert dockerfile.all("FROM") and dockerfile.all("ENTRYPOINT"), name
        ignore = (DOCKER / f"{name}.Dockerfile.dockerignore").read_text().splitlines()
        for source in dockerfile.copied().values():
            assert (REPO / source).exists(), f"{name}: COPY {source}: no such file"
            assert not ignored(source.rstrip("/"), ignore), f"{name}: {source} is excluded by its .dockerignore"
        assert ignored(".venv/bin/python", ignore) and ignored("pipeline/__pycache__/cli.pyc", ignore)


def test_worker_image_matches_setup_py_and_installs_the_project_without_tensorflow(dockerfiles):
    pins, worker = setup_pins(), dockerfiles["worker"]
    major, minor = pins["python_requires"]
    assert worker.base_image == "apache/beam_python3.11_sdk:" + pins["beam"]
    assert (3, 11) >= (int(major), int(minor))
    copied = worker.copied()
    assert {"setup.py", "pipeline/", "transforms/"} <= set(copied.values())
    run = worker.run_text()
    assert re.search(r"pip install [^\n]*\s\.(\s|$)", run), "the project is not installed"
    assert "tensorflow" not in run.replace("import tensorflow", "")  # only the check that it is absent
    assert f"__version__ == '{pins['beam']}'" in run
    assert worker.all("ENTRYPOINT")[-1].words == ["/opt/apache/beam/boot"]


def test_launcher_image_runs_the_template_entry_point_with_the_pinned_beam(dockerfiles):
    pins, launcher = setup_pins(), dockerfiles["launcher"]
    assert launcher.base_image.startswith("gcr.io/dataflow-templates-base/python311-template-launcher-base:")
    copied = launcher.copied()
    assert copied[launcher.env["FLEX_TEMPLATE_PYTHON_PY_FILE"]] == "docker/flex_template/main.py"
    assert copied[launcher.env["FLEX_TEMPLATE_PYTHON_SETUP_FILE"]] == "setup.py"
    assert {"pipeline/", "transforms/", "configs/"} <= set(copied.values())
    run = launcher.run_text()
    assert f'"apache-beam[gcp]=={pins["beam"]}" .' in run
    assert (
        launcher.args["COMMAND"] in ("convert", "refresh")
        and launcher.env["PIPELINE_COMMAND"] == launcher.args["COMMAND"]
    )
    assert launcher.all("ENTRYPOINT")[-1].words == ["/opt/google/dataflow/python_template_launcher"]


def test_training_image_pins_tensorflow_and_varies_only_by_build_arg(dockerfiles):
    pins, training = setup_pins(), dockerfiles["training"]
    assert training.args["TENSORFLOW_VERSION"] == pins["tensorflow"]
    assert training.base_image == "python:3.11-slim"
    run = training.run_text()
    for variant, package in (("cpu", "tensorflow=="), ("gpu", "tensorflow[and-cuda]=="), ("tpu", "tensorflow-tpu==")):
        assert re.search(rf"{variant}\) pip install [^;]*\"{re.escape(package)}{pins['tensorflow']}\"", run), variant
    # every manifest the trainer reads is checked against its schema, by jsonschema as setup.py pins it
    assert f'pip install --no-cache-dir "{pins["jsonschema"]}"' in run
    copied = set(training.copied().values())
    assert "trainer/" in copied
    # Of the job, what the trainer imports: the dataset contract, the opener of local files, the escaper.
    assert copied - {"trainer/"} == {"core/__init__.py", "core/contract/", "core/local_files.py", "core/shown.py"}
    assert training.all("ENTRYPOINT")[-1].words == ["python", "-m", "trainer"]


PARSERS = {"convert": convert.parser, "refresh": refresh.parser}
# A value of each type of flag, as the template launcher passes it.
_SAMPLE_VALUES = {int: "3", float: "0.5", split_fractions: "train=0.8,validation=0.2"}


def _sample_value(flag: Flag) -> str:
    if flag.choices:
        return flag.choices[-1]
    if flag.switch:
        return "true"
    return _SAMPLE_VALUES.get(flag.type, "gs://b/x")


def test_template_metadata_is_committed_with_one_parameter_per_flag():
    assert template_parameters("refresh") == template_parameters("convert") + ["keep"]
    for command in ("convert", "refresh"):
        committed = json.loads((DOCKER / "flex_template" / f"{command}_metadata.json").read_text())
        assert committed == template_metadata(command), f"regenerate: python -m pipeline.dataflow metadata {command}"
        assert [p["name"] for p in committed["parameters"]] == template_parameters(command)
        required = {p["name"] for p in committed["parameters"] if not p["isOptional"]}
        assert required == {"input", "output"}


@pytest.mark.parametrize("command", ["convert", "refresh"])
def test_the_command_accepts_exactly_the_template_parameters(command):
    """Every parameter, as the launcher passes it (`--name=value`), passes the metadata's regexes
    and reaches the command's own parser, which has no flag the template lacks."""
    parameters = template_parameters(command)
    values = {flag.name: _sample_value(flag) for flag in COMMAND_FLAGS[command] if flag.name in parameters}
    regexes = {p["name"]: p.get("regexes", []) for p in template_metadata(command)["parameters"]}
    for name, value in values.items():
        assert all(re.match(regex, value) for regex in regexes[name]), (name, value, regexes[name])
    for name, bad in (("kind", "imagez"), ("overwrite", "yes"), ("num_shards", "-1"), ("max_error_fraction", "1%")):
        assert not re.match(regexes[name][0], bad), (name, bad)

    argv = template_argv(command, [f"--{name}={value}" for name, value in values.items()], fetch=lambda uri: uri)
    args = PARSERS[command]().parse_args(argv)
    # --promote is a person's decision, made by hand: it runs no job for a template to stage
    assert set(vars(args)) - set(parameters) == ({"promote"} if command == "refresh" else set())
    assert all(vars(args)[name] is not None for name in parameters), vars(args)


def test_template_arguments_are_made_fit_for_the_command_line(tmp_path):
    fetched = []

    def fetch(uri):
        fetched.append(uri)
        return str(tmp_path / "fetched.yaml")

    (tmp_path / "template" / "configs").mkdir(parents=True)
    (tmp_path / "template" / "configs" / "images.yaml").write_text("kind: images\n")
    argv = ["--input=gs://b/in", "--overwrite=true", "--config=configs/images.yaml", "--runner=DataflowRunner"]
    assert template_argv("convert", argv, base_dir=tmp_path / "template", fetch=fetch) == [
        "--input=gs://b/in",
        "--overwrite",
        f"--config={tmp_path}/template/configs/images.yaml",
        "--runner=DataflowRunner",
    ]
    assert template_argv("refresh", ["--overwrite=false", "--config=gs://b/c.yaml", "--keep=3"], fetch=fetch) == [
        f"--config={tmp_path / 'fetched.yaml'}",
        "--keep=3",
    ]
    assert fetched == ["gs://b/c.yaml"]


def test_template_entry_point_runs_a_refresh_as_the_launcher_calls_it(tmp_path):
    """docker/flex_template/main.py with `--name=value` parameters, from another folder, as in the image."""
    source = tmp_path / "in"
    for label in ("circle", "square"):
        (source / label).mkdir(parents=True)
        for path in sorted((REPO / "sample" / "images" / label).iterdir())[:3]:
            (source / label / path.name).write_bytes(path.read_bytes())
    template = tmp_path / "template"  # laid out as WORKDIR /template in docker/launcher.Dockerfile
    template.mkdir()
    shutil.copy(DOCKER / "flex_template" / "main.py", template / "main.py")
    shutil.copytree(REPO / "configs", template / "configs")
    root = tmp_path / "root"
    result = subprocess.run(
        [
            sys.executable,
            str(template / "main.py"),
            f"--input={source}",
            f"--output={root}",
            "--config=configs/images.yaml",
            "--overwrite=false",
            "--keep=2",
            "--max_error_fraction=0.5",
        ],
        cwd=tmp_path,
        env={**os.environ, "PIPELINE_COMMAND": "refresh", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    version = (root / LATEST_NAME).read_text().strip()
    assert (root / version / "manifest.json").exists()


def test_build_script_builds_every_dockerfile():
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "build_images.sh"), "--dry-run"],
        env={**os.environ, "PROJECT": "test-project", "BUCKET": "test-bucket", "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    built = re.findall(r"^\+ docker build -f (\S+)", result.stdout, re.M)
    assert sorted(set(built)) == sorted(f"docker/{n}.Dockerfile" for n in ("launcher", "training", "worker"))
    assert "--build-arg COMMAND=refresh" in result.stdout and "--build-arg VARIANT=tpu" in result.stdout
    for command in ("convert", "refresh"):
        assert (
            f"gcloud dataflow flex-template build gs://test-bucket/dataflow/templates/tfrecord-{command}.json"
            in result.stdout
        )
        assert f"--metadata-file docker/flex_template/{command}_metadata.json" in result.stdout
