"""Every parser has bounds on size, depth and work, and each kind of text has one reader that
holds them (its chokepoint): a scan of the code (its syntax trees, as tests/test_code_map.py reads
imports) fails when any module reads that kind another way, and generated texts of each kind end
in a value, a dead letter or a one-line refusal, never in Python's RecursionError or a hang.

- YAML (settings files, --set values): core.local_files.load_yaml / parse_yaml."""

from __future__ import annotations

import ast
import pathlib
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.local_files import MAX_YAML_DEPTH, NotYaml, parse_yaml
from pipeline.config import ConfigError, load_config
from tests.alarm import alarm
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline
from tests.test_code_map import MODULES, REPO

SCANNED = {**MODULES, **{f"scripts.{p.stem}": p for p in sorted((REPO / "scripts").glob("*.py"))}}


@pytest.fixture(autouse=True)
def deadline():
    """A parse without a bound on its work ends in TimeoutError after 60 s."""
    with alarm(60, "unbounded"):
        yield


# --- the scan: what each module reaches, by name


def reached(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module, and attribute of one, that the file at `path` imports
    or uses: `import yaml` is `yaml`, `yaml.safe_load(...)` `yaml.safe_load`, `from csv import
    reader as r` `csv.reader`, names bound by `import ... as` followed to the module."""
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
                found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.append((node.lineno, f"{node.module}.{alias.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = [node.attr]
            inner = node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in bound:
                found.append((node.lineno, ".".join([bound[inner.id], *reversed(chain)])))
    return found


def bypasses(forbidden: tuple[str, ...], chokepoint: str) -> list[str]:
    """`module:line name` wherever a module other than `chokepoint` reaches a name of `forbidden`
    (or one below it)."""
    return sorted(
        f"{module}:{line} {name}"
        for module, path in SCANNED.items()
        if module != chokepoint
        for line, name in reached(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    )


YAML = ("yaml", "ruamel", "_yaml")


def test_the_scan_finds_what_each_chokepoint_reaches():
    """The scan must see the readers themselves, or it would pass on any code."""
    assert {"yaml", "yaml.SafeLoader"} <= {name for _, name in reached(MODULES["core.local_files"])}
    assert any(found.startswith("core.local_files:") for found in bypasses(YAML, "none"))


def test_yaml_is_read_by_load_yaml_alone():
    """A settings file's bounds (bytes, values once aliases are expanded, nesting) hold for every
    reader of YAML: no other module imports a YAML library."""
    assert bypasses(YAML, "core.local_files") == []


# --- YAML: nesting


def nested(levels: list[str], leaf: str = "1") -> str:
    """YAML of lists and mappings inside one another, outermost first: `[`, `{a: ` (flow style)."""
    closing = {"[": "]", "{a: ": "}"}
    return "".join(levels) + leaf + "".join(closing[level] for level in reversed(levels))


@settings(max_examples=60, deadline=None)
@given(levels=st.lists(st.sampled_from(["[", "{a: "]), min_size=1, max_size=3000))
def test_yaml_nested_any_depth_is_read_or_refused_in_one_line(levels):
    text = "a: " + nested(levels) + "\n"
    if len(levels) + 1 > MAX_YAML_DEPTH:
        with pytest.raises(NotYaml) as refused:
            parse_yaml(text)
        assert str(refused.value).startswith(f"nests lists or mappings more than {MAX_YAML_DEPTH} levels deep")
    else:
        assert parse_yaml(text)["a"] is not None


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(2, MAX_YAML_DEPTH - 1), anchors=st.integers(1, 40))
def test_aliases_that_nest_what_they_name_are_measured_expanded(depth, anchors):
    """`b: &b [[*a]]` nests `a` two levels deeper: a chain of them is as deep as it expands,
    whatever each anchor's own text nests."""
    lines = [f"a0: &a0 {nested(['['] * depth)}"]
    lines += [f"a{i}: &a{i} {nested(['['] * depth, f'*a{i - 1}')}" for i in range(1, anchors)]
    text = "\n".join(lines) + "\n"
    if depth * anchors + 1 > MAX_YAML_DEPTH:
        with pytest.raises(NotYaml, match="levels deep"):
            parse_yaml(text)
    else:
        parse_yaml(text)


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH - 1, MAX_YAML_DEPTH, 5000])
def test_settings_nested_at_and_past_the_bound_are_one_line(tmp_path, depth):
    """Within the bound the checks of the values run (and refuse the key in a line: Python's
    recursive readers of them hold it); past it, the refusal names the bound."""
    path = tmp_path / "deep.yaml"
    path.write_text("image: " + nested(["{a: "] * depth) + "\n")
    start = time.monotonic()
    with pytest.raises(ConfigError) as refused:
        load_config(str(path))
    message = str(refused.value)
    assert time.monotonic() - start < 5 and "\n" not in message and len(message) < 2000, message[:2000]
    if depth + 1 > MAX_YAML_DEPTH:
        assert message.startswith(f"config {path} nests lists or mappings more than {MAX_YAML_DEPTH} levels deep")
    else:
        assert message.startswith(f"config {path}: image.a: "), message


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_the_command_refuses_a_deeply_nested_settings_file_in_one_line(tmp_path, opening):
    """Was a 2,990-line RecursionError at exit 1, which means "rejected"."""
    path = tmp_path / "deep.yaml"
    path.write_text(nested([opening] * 5000) + "\n")
    result = run_pipeline(["--config", path, "--input", tmp_path, "--output", tmp_path / "out"])
    assert result.returncode == 2, result.stderr
    line = the_one_line(result.stderr)
    assert line.endswith(
        f"ERROR pipeline: config {path} nests lists or mappings more than {MAX_YAML_DEPTH} levels deep, the most "
        "a settings file may (its settings nest a few levels: `image: {keys: {label: ...}}`)"
    )
    assert not (tmp_path / "out").exists()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(MAX_YAML_DEPTH + 1, 3000))
def test_the_cloud_settings_refuse_deep_nesting_in_their_file_and_their_set_values(tmp_path, depth):
    from pipeline.dataflow.settings import SettingsError, load_settings

    path = tmp_path / "dataflow.yaml"
    path.write_text("project: " + nested(["["] * depth) + "\n")
    with pytest.raises(SettingsError, match=f"more than {MAX_YAML_DEPTH} levels deep"):
        load_settings(path, environ={})
    with pytest.raises(SettingsError, match=f"more than {MAX_YAML_DEPTH} levels deep"):
        load_settings(None, environ={}, assignments=[f"project.id={nested(['['] * depth)}"])
