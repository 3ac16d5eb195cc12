"""Every parser has bounds on size, depth and work, and each kind of text has one reader that
holds them (its chokepoint): a scan of the code (its syntax trees, as tests/test_code_map.py reads
imports) fails when any module reads that kind another way, and generated texts of each kind end
in a value, a dead letter or a one-line refusal, never in Python's RecursionError or a hang.

- YAML (settings files, --set values): core.local_files.load_yaml / parse_yaml.
- JSON (manifests, error reports, leases, model.json, options given as JSON):
  core.contract.json_text.loads / json_lines (writing JSON is anyone's).
- CSV (tabular files, CSVs of image URIs, the planner's and the dialect's reads of them):
  transforms.csv_records.CsvRecords (catching csv.Error is anyone's); its quotes left open are
  tested in tests/test_csv_quotes.py."""

from __future__ import annotations

import ast
import dataclasses
import datetime
import importlib
import inspect
import json
import shutil
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.contract import json_text
from core.contract.json_text import MAX_DEPTH, NotJson, json_lines, nesting
from core.contract.layout import REPORT_LINE_CHARS
from core.local_files import MAX_YAML_DEPTH, NotYaml, parse_yaml
from pipeline.cli import main
from pipeline.config import ConfigError, load_config
from pipeline.lease import LEASE_BYTES, Holder
from tests.alarm import alarm
from tests.code_scan import bypasses, reached, users
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline
from tests.test_bounded_inputs import Spy


@pytest.fixture(autouse=True)
def deadline():
    """A parse without a bound on its work ends in TimeoutError after 60 s."""
    with alarm(60, "unbounded"):
        yield


YAML = ("yaml", "ruamel", "_yaml")
JSON = ("json.load", "json.loads", "json.JSONDecoder", "json.decoder", "json.scanner", "_json")
OTHER_JSON = ("simplejson", "orjson", "ujson", "rapidjson")
# What parses CSV (catching csv.Error is anyone's): the csv module's readers and its one setting,
# and the libraries that read CSV files whole.
CSV = (
    "csv.reader",
    "csv.DictReader",
    "csv.Sniffer",
    "csv.field_size_limit",
    "_csv",
    "pandas",
    "pyarrow",
    "polars",
    "numpy.loadtxt",
    "numpy.genfromtxt",
)
# Each format's one reader, the libraries only it may reach, and the bounds it reads within: module
# constants of the reader that its code uses, or a parameter every caller must pass.
PARSERS = {
    "YAML": ("core.local_files", YAML, ["MAX_YAML_BYTES", "MAX_YAML_NODES", "MAX_YAML_DEPTH"], []),
    "JSON": ("core.contract.json_text", JSON + OTHER_JSON, ["MAX_DEPTH"], ["loads.max_chars", "json_lines.max_chars"]),
    "CSV": ("transforms.csv_records", CSV, ["CSV_ROW_LIMIT", "CSV_DELIMITER_LIMIT", "CSV_ROW_LINES"], []),
}


def test_the_scan_finds_what_each_chokepoint_reaches():
    """The scan must see the readers themselves, or it would pass on any code."""
    assert {"yaml", "yaml.SafeLoader"} <= {reach.name for reach in reached("core.local_files")}
    assert {"core.local_files", "core.contract.json_text"} <= users(YAML + JSON)
    assert users(CSV) == {"transforms.csv_records"}


@pytest.mark.parametrize("parser", PARSERS)
def test_every_parser_is_one_reader_with_its_bounds(parser):
    """YAML, JSON and CSV are each parsed by one module, and it has its bounds: constants its code
    uses (not only defines), and bounds its callers must give (a parameter without a default). So
    a settings file's bounds (bytes, values once aliases are expanded, nesting), JSON's (length,
    nesting) and a CSV record's (characters, delimiters, lines) hold for every reader."""
    module, libraries, constants, parameters = PARSERS[parser]
    assert bypasses(libraries, {module}) == []
    reader = importlib.import_module(module)
    tree = ast.parse(inspect.getsource(reader))
    used = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]
    for constant in constants:
        assert isinstance(getattr(reader, constant), int) and used.count(constant) >= 1, constant
    for parameter in parameters:
        function, name = parameter.split(".")
        assert inspect.signature(getattr(reader, function)).parameters[name].default is inspect.Parameter.empty


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


# --- JSON: the one reader


def depth(value) -> int:
    """How deep a parsed JSON value's arrays and objects nest (recursive: for small values)."""
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


TRICKY = st.text(alphabet='[]{}"\\\n,: ab\u00e9\ud800', max_size=8)  # brackets, quotes, escapes inside strings
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY, inner, max_size=4),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, wrap=st.lists(st.sampled_from(["list", "object"]), max_size=40), indent=st.sampled_from([None, 2]))
def test_nesting_is_counted_from_the_text_as_parsing_finds_it(value, wrap, indent):
    for kind in wrap:
        value = [value] if kind == "list" else {"k": value}
    text = json.dumps(value, indent=indent, ensure_ascii=indent is None)
    assert nesting(text) == depth(value)
    if depth(value) > MAX_DEPTH:
        with pytest.raises(NotJson, match=f"more than the {MAX_DEPTH} it may"):
            json_text.loads(text, len(text))
    else:
        assert json_text.loads(text, len(text)) == value


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='[]{}"\\ 0123456789.eE+-,:truefalsnNIiy', max_size=60) | st.binary(max_size=40))
def test_any_text_is_a_value_or_one_line_not_json(text):
    try:
        json_text.loads(text, 1000)
    except NotJson as e:
        assert "\n" not in str(e)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100_000, f"nests arrays or objects 100000 levels deep, more than the {MAX_DEPTH} it may"),
        ('{"a": NaN}', "is not JSON: it holds NaN, which JSON has no value for"),
        ("[-Infinity]", "is not JSON: it holds -Infinity, which JSON has no value for"),
        ("1" * 5000, "is not JSON this reader takes: Exceeds the limit (4300 digits) for integer string conversion"),
        ("[1] " * 300_000, "is longer than 1,000,000 characters, the most it may be"),
        (b"\xff{}", "is not UTF-8 text: byte 0xff at offset 0"),
    ],
)
def test_what_json_loads_would_take_or_crash_on_is_refused_in_one_line(text, message):
    with pytest.raises(NotJson) as refused:
        json_text.loads(text, 1_000_000)
    assert str(refused.value).startswith(message)


def test_json_lines_never_hold_a_line_past_its_bound():
    text = Spy('{"a": 1}\n' + "[" * 5000 + "\n\n" + '"' + "x" * 250 + '"\n[2]')
    found = list(json_lines(text, 100))
    assert text.longest <= 101
    assert [(number, value if not isinstance(value, NotJson) else str(value)) for number, value in found] == [
        (1, {"a": 1}),
        (2, "is longer than 100 characters, the most a line may be"),
        (4, "is longer than 100 characters, the most a line may be"),
        (5, [2]),
    ]


@pytest.fixture(scope="module")
def tabular(tmp_path_factory):
    """A small tabular dataset with a dead letter."""
    folder = tmp_path_factory.mktemp("tabular")
    (folder / "in").mkdir()
    (folder / "in" / "t.csv").write_text("id,n\n" + "".join(f"{i},{i}\n" for i in range(20)) + "1,2,3\n")
    out = folder / "out"
    assert (
        main(
            [
                "--kind",
                "csv",
                "--input",
                str(folder / "in" / "*.csv"),
                "--output",
                str(out),
                "--max_error_fraction",
                "0.5",
            ]
        )
        == 0
    )
    return out


@pytest.mark.parametrize(
    "line, reason",
    [
        ("[" * 100_000, f"nests arrays or objects 100000 levels deep, more than the {MAX_DEPTH} it may"),
        ('"' + "x" * (REPORT_LINE_CHARS + 10) + '"', f"is longer than {REPORT_LINE_CHARS:,} characters"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_inspect_and_verify_read_an_error_report_line_they_cannot_take_as_one_problem(
    tabular, tmp_path, capsys, line, reason
):
    """A deep line was a RecursionError at exit 3 in --verify; the summary said so in its place."""
    out = tmp_path / "out"
    shutil.copytree(tabular, out)
    (out / "errors-00000-of-00001.jsonl").write_text(line + "\n")
    assert main(["inspect", str(out)]) == 0
    assert "[?] errors-00000-of-00001.jsonl:1: unreadable line: " in capsys.readouterr().out
    assert main(["inspect", str(out), "--verify"]) == 1
    printed = capsys.readouterr().out
    assert "errors-00000-of-00001.jsonl: line 1: not a dead letter (" in printed and reason in printed


VALID = Holder("run", "host", 123, "2025-01-01T00:00:00+00:00", "2025-01-01T00:05:00+00:00")


@settings(max_examples=300, deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from(["run", "host", "pid", "started", "expires", "other"]),
        st.none()
        | st.integers(-(2**70), 2**70)
        | st.text(max_size=30)
        | st.lists(st.integers(), max_size=2)
        | st.sampled_from(["2025-01-01T00:00:00", "2025-01-01T00:00:00+00:00", "9999-12-31T23:59:59+14:00"]),
    ),
    base=st.booleans(),
)
def test_a_lease_file_is_a_holder_whose_staleness_can_be_judged_or_none(fields, base):
    """Whatever another run or a person left in DEST/.lease: a holder, or None (stale)."""
    body = {**dataclasses.asdict(VALID), **fields} if base else fields
    holder = Holder.from_bytes(json.dumps(body).encode())
    if holder is not None:
        holder.is_stale(datetime.datetime.now(datetime.timezone.utc))
        holder.describe()


def test_a_lease_file_past_its_bound_or_nested_deep_is_none():
    assert Holder.from_bytes(VALID.to_bytes()) == VALID
    assert Holder.from_bytes(b" " * LEASE_BYTES + VALID.to_bytes()) is None
    assert Holder.from_bytes(b"[" * 100_000) is None
