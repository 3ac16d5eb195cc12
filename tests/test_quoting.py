"""The content of a user's file reaches a message, a report or a log line only through one
describer, core.shown.quoted. It quotes only text: a file established to be what it claims, read
as UTF-8. A file that is not text is named by its kind and size (core.file_signatures). A
settings file that fails to parse, or that is a key given as --config, is named and never quoted.

The scans:
- no module but core.shown makes a reprlib.Repr, so there is no second describer;
- YAML is parsed only in core.local_files (tests/test_bounded_parsers.py scans it);
- an exception whose text quotes the file it came from (YAML's MarkedYAMLError holds a snippet
  of the text, pydantic's ValidationError the input) is never turned into text whole: a handler
  reads only its fields (`e.problem_mark`, `e.errors()`) or chains it (`raise ... from e`);
- the modules that read CSV cells or settings (CELL_MODULES) format no value with `!r` or repr(): each goes
  through quoted.

The generated cases put a random secret inside settings files that are not YAML (keys, broken
YAML of every kind of error, binary files, other encodings) and inside files that a tabular
pattern matches but that are not CSV text (archives, compressed data, UTF-16, NUL bytes, Latin-1
rows, an unclosed quote). The secret never appears in a refusal, in any line a run or `inspect`
prints, in the error report, or in the manifest.
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import pathlib
import string
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.config import ConfigError, load_config
from pipeline.dataflow.settings import SettingsError, load_settings
from tests.code_scan import calls, tree
from tests.subprocess_limits import run_pipeline
from tests.test_code_map import MODULES

# Exceptions whose str() quotes the text they were raised on, by the names they are caught by.
CONTENT_EXCEPTIONS = frozenset(
    {
        "yaml.YAMLError",
        "yaml.MarkedYAMLError",
        "yaml.scanner.ScannerError",
        "yaml.parser.ParserError",
        "yaml.composer.ComposerError",
        "yaml.constructor.ConstructorError",
        "yaml.reader.ReaderError",
        "pydantic.ValidationError",
        "ValidationError",
    }
)
# The modules that read CSV cells or settings values: every value they put in a message goes
# through quoted.
CELL_MODULES = (
    "transforms.csv_dialect",
    "transforms.tabular",
    "transforms.csv_numbers",
    "transforms.label_column",
    "transforms.sources",
    "pipeline.config",
    "pipeline.dataflow.settings",
    "pipeline.input_shape",
    "pipeline.planning",
)


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([getattr(node, "id", ""), *reversed(parts)])


def _caught(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return set()
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {_dotted(t) for t in types}


def whole_uses(module_tree: ast.AST) -> list[int]:
    """Lines where an exception of CONTENT_EXCEPTIONS, caught by name, is used whole: anything
    but reading one of its fields or chaining it (`raise ... from e`)."""
    found = []
    for handler in ast.walk(module_tree):
        if not (isinstance(handler, ast.ExceptHandler) and handler.name and _caught(handler) & CONTENT_EXCEPTIONS):
            continue
        allowed = set()
        for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                allowed.add(id(node.value))
            if isinstance(node, ast.Raise) and isinstance(node.cause, ast.Name):
                allowed.add(id(node.cause))
        for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
            if isinstance(node, ast.Name) and node.id == handler.name and id(node) not in allowed:
                found.append(node.lineno)
    return found


def repr_formats(module_tree: ast.AST) -> list[int]:
    """Lines that format a value with `!r`, `%r` or repr()."""
    found = []
    for node in ast.walk(module_tree):
        if isinstance(node, ast.FormattedValue) and node.conversion == ord("r"):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "repr":
            found.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "%r" in node.value:
            found.append(node.lineno)
    return found


def test_there_is_one_describer():
    others = sorted(
        c.site for c in calls() if c.name in ("reprlib.Repr", "reprlib.repr", "Repr") and c.module != "core.shown"
    )
    assert not others, "a describer besides core.shown.quoted:\n" + "\n".join(others)


def test_exceptions_that_quote_their_text_are_never_shown_whole():
    found = {module: whole_uses(tree(module)) for module in MODULES}
    bypasses = sorted(f"{module}:{line}" for module, lines in found.items() for line in lines)
    assert not bypasses, "a YAML or validation error's text, which quotes the file, in a message:\n" + "\n".join(
        bypasses
    )


def test_cell_values_are_quoted_by_the_describer():
    found = sorted(f"{module}:{line}" for module in CELL_MODULES for line in repr_formats(tree(module)))
    assert not found, "a value formatted by repr, not core.shown.quoted:\n" + "\n".join(found)


def test_the_scans_find_each_kind_of_bypass():
    bad = ast.parse(
        "try:\n    x()\nexcept yaml.YAMLError as e:\n    raise NotYaml(f'bad: {e}') from e\n"
        "try:\n    x()\nexcept (OSError, pydantic.ValidationError) as e:\n    log.error('%s', e)\n"
        "try:\n    x()\nexcept yaml.YAMLError as e:\n    raise NotYaml(f'at {e.problem_mark.line}') from e\n"
        "m = f'{value!r} and {repr(other)}' + '%r' % (v,)\n"
    )
    assert whole_uses(bad) == [4, 8]
    assert len(repr_formats(bad)) == 3


SECRET = st.text(string.ascii_letters + string.digits, min_size=16, max_size=24).map(lambda s: f"tok{s}")


def _settings_file(kind: str, secret: str) -> bytes:
    """A file given as settings that holds `secret` and is not settings, or not YAML."""
    return {
        "pem": f"-----BEGIN PRIVATE KEY-----\nMIIE{secret}\n-----END PRIVATE KEY-----\n".encode(),
        "json key": json.dumps({"type": "service_account", "private_key": secret, "client_email": "a@b"}).encode(),
        "unclosed": f"kind: images\nsplits: [{secret},\n".encode(),
        "tag": f"kind: !!python/object:{secret} x\n".encode(),
        "alias": f"kind: *{secret}\n".encode(),
        "tab": f"image:\n\tkeys: {secret}\n".encode(),
        "escape": f'kind: "{secret}\\q"\n'.encode(),
        "colon": f"kind: images\n splits: {secret}: x\n".encode(),
        "anchor twice": f"a: &{secret} 1\nb: &{secret} 2\n".encode(),
        "control": f"kind: {secret}\x01\n".encode(),
        "nul": f"kind: {secret}\x00\n".encode(),
        "latin-1": f"kind: {secret}\xe9\n".encode("latin-1"),
        "utf-16": f"kind: {secret}\n".encode("utf-16"),
        "zip": _zip(secret),
        "gzip": gzip.compress(f"kind: {secret}\n".encode()),
    }[kind]


SETTINGS_KINDS = (
    "pem",
    "json key",
    "unclosed",
    "tag",
    "alias",
    "tab",
    "escape",
    "colon",
    "anchor twice",
    "control",
    "nul",
    "latin-1",
    "utf-16",
    "zip",
    "gzip",
)


def _zip(secret: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:  # stored, not compressed: the secret is in its bytes
        archive.writestr("sheet.xml", f"<c>{secret}</c>")
    return buffer.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(SETTINGS_KINDS), secret=SECRET)
def test_a_settings_file_that_is_not_settings_is_named_never_quoted(tmp_path, kind, secret):
    path = tmp_path / "settings.yaml"
    path.write_bytes(_settings_file(kind, secret))
    with pytest.raises(ConfigError) as config_refusal:
        load_config(str(path))
    with pytest.raises(SettingsError) as settings_refusal:
        load_settings(path, environ={})
    for message in (str(config_refusal.value), str(settings_refusal.value)):
        assert secret not in message and str(path) in message and "\n" not in message, message


@pytest.mark.parametrize(
    "kind, says",
    [
        ("pem", "is a PEM key or certificate, not a settings file (YAML)"),
        ("json key", "is credentials in JSON (a service-account or OAuth client key), not a settings file (YAML)"),
        ("unclosed", "is not valid YAML: a structure YAML cannot parse"),
        ("zip", "is a ZIP archive"),
    ],
)
def test_a_key_or_broken_settings_given_as_config_is_refused_by_what_it_is(tmp_path, kind, says):
    """The named broken case, as a process: the refusal names the file and what it is."""
    secret = "tokSECRETsecret0123456789"
    path = tmp_path / "key"
    path.write_bytes(_settings_file(kind, secret))
    (tmp_path / "in").mkdir()
    result = run_pipeline(["--config", path, "--input", tmp_path / "in", "--output", tmp_path / "out"])
    assert result.returncode == 2, result.stderr
    assert secret not in result.stdout + result.stderr
    assert f"config {path} {says}" in result.stderr, result.stderr


def _table_member(kind: str, secret: str) -> bytes:
    """A file a tabular pattern matches that holds `secret` where it is not CSV text."""
    return {
        "zip": _zip(secret),
        "gzip": gzip.compress(f"a,b,label\n1,{secret},x\n".encode()),
        "utf-16": f"a,b,label\n1,{secret},x\n".encode("utf-16"),
        "nul header": f"a,b,label\x00{secret}\n1,2,x\n".encode(),
        "nul row": f"a,b,label\n1,{secret}\x00,x\n2,3,y\n".encode(),
        "latin-1 row": f"a,b,label\n1,{secret}\xe9,x\n2,3,y\n".encode("latin-1"),
        "latin-1 header": f"a\xe9{secret},b,label\n1,2,x\n".encode("latin-1"),
        "unclosed quote": f'a,b,label\n1,2,x\n3,"{secret},y\n'.encode(),
        "pdf": f"%PDF-1.4\n{secret}\n".encode(),
    }[kind]


TABLE_KINDS = (
    "zip",
    "gzip",
    "utf-16",
    "nul header",
    "nul row",
    "latin-1 row",
    "latin-1 header",
    "unclosed quote",
    "pdf",
)


def _table(folder: pathlib.Path, kinds: list[str], secret: str) -> pathlib.Path:
    folder.mkdir()
    rows = "".join(f"{i},{i * 2},{'xy'[i % 2]}\n" for i in range(30))
    (folder / "a.csv").write_text("a,b,label\n" + rows, encoding="utf-8")  # the first match: the dataset's header
    for i, kind in enumerate(kinds):
        (folder / f"b{i}.csv").write_bytes(_table_member(kind, secret))
    return folder


def _said(result, out: pathlib.Path) -> str:
    """All a run left for a person: what it printed, its error reports and its manifest."""
    files = sorted(out.glob("errors-*.jsonl")) + sorted(out.glob("manifest*.json"))
    return result.stdout + result.stderr + "".join(f.read_text(errors="replace") for f in files)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(TABLE_KINDS), min_size=1, max_size=4, unique=True), secret=SECRET)
def test_files_a_table_pattern_matches_that_are_not_csv_text_are_never_quoted(tmp_path_factory, kinds, secret):
    tmp = tmp_path_factory.mktemp("table")
    folder = _table(tmp / "in", kinds, secret)
    out = tmp / "out"
    argv = ["--kind", "csv", "--input", folder / "*.csv", "--output", out, "--splits", "train=1.0"]
    converted = run_pipeline([*argv, "--max_error_fraction", "0.9"])
    assert converted.returncode == 0, converted.stderr
    inspected = run_pipeline(["inspect", out])
    assert inspected.returncode == 0, inspected.stderr
    said = _said(converted, out) + inspected.stdout + inspected.stderr
    assert secret not in said, said


def test_binary_files_in_the_error_report_are_described_by_kind_and_size(tmp_path):
    """The named broken case: a workbook and a NUL-holding file a tabular pattern matched."""
    secret = "tokSECRETsecret0123456789"
    folder = _table(tmp_path / "in", ["zip", "nul header"], secret)
    out = tmp_path / "out"
    argv = ["--kind", "csv", "--input", folder / "*.csv", "--output", out, "--splits", "train=1.0"]
    result = run_pipeline([*argv, "--max_error_fraction", "0.5"])
    assert result.returncode == 0, result.stderr
    assert secret not in _said(result, out)
    letters = {
        pathlib.Path(letter["source"]).name: letter
        for report in out.glob("errors-*.jsonl")
        for letter in map(json.loads, report.read_text().splitlines())
    }
    zip_size, nul_size = ((folder / name).stat().st_size for name in ("b0.csv", "b1.csv"))
    assert letters["b0.csv"]["stage"] == "read"
    assert letters["b0.csv"]["reason"].startswith("it is not UTF-8 CSV text: it begins as a ZIP archive")
    assert f"({zip_size:,} bytes)" in letters["b0.csv"]["reason"]
    assert (
        "binary data, not text" in letters["b1.csv"]["reason"]
        and f"({nul_size:,} bytes)" in letters["b1.csv"]["reason"]
    )
