"""manifest.schema.json, the JSON Schema the package ships (core.contract.manifest.json_schema):
every manifest that real conversions write validates against it, it names exactly the fields of
the manifest's dataclasses, and it refuses a manifest missing a key or holding a value of another
type. The reference page's field table is generated from it (scripts/manifest_reference.py)."""

from __future__ import annotations

import copy
import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys
import typing

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.contract.features import DEFAULT_IMAGE_KEYS, ORIGINAL_SIZE_KEYS
from core.contract.layout import ARRAY_RECORD, FILE_FORMATS, is_contained
from core.contract.manifest import (
    COMPRESSIONS,
    DTYPES,
    FORMAT,
    FORMAT_VERSION,
    KINDS,
    OTHER_FILE_FORMAT_VERSION,
    Manifest,
    json_schema,
)
from pipeline.cli import main
from tests import broken_images
from tests.test_publication import photos

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "scripts"))
import manifest_reference  # noqa: E402  (a script module, found through the line above)

SCHEMA = json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
SAMPLE = REPO / "sample"


@pytest.fixture(scope="module")
def manifests(tmp_path_factory) -> dict[str, tuple[str, dict]]:
    """One small real conversion of each kind and option on the default local runner, as
    {case: (the manifest's file name, its JSON)}. The image folder holds a copy, a TIFF (which is
    re-encoded), an HTML page saved as .jpg and a text file, so that the copies report, warnings,
    converted, errors and skipped sources are all there; the image CSV names a missing image and
    the tables hold a row too short."""
    tmp = tmp_path_factory.mktemp("schema")
    folder = photos(tmp / "photos", 4)
    shutil.copy(folder / "circle/0001.jpg", folder / "square/copy.jpg")
    (folder / "square/scan.tiff").write_bytes(broken_images.image_bytes("TIFF", "RGB", (33, 21)))
    (folder / "triangle/error_page.jpg").write_bytes(broken_images.html_page())
    (folder / "README.txt").write_text("not an image")
    image_csv = tmp / "images.csv"
    rows = ["TRAIN,photos/circle/0001.jpg,circle", ",photos/square/0001.jpg,square", "TRAIN,photos/missing.jpg,x"]
    image_csv.write_text("split,image_uri,label\n" + "\n".join(rows) + "\n")
    tables = pathlib.Path(shutil.copytree(SAMPLE / "tabular", tmp / "tables"))
    (tables / "z-short-row.csv").write_text((tables / "part-000.csv").read_text().splitlines()[0] + "\n1,2\n")
    config = tmp / "csv.yaml"
    config.write_text("kind: csv\ncsv:\n  schema: {flag: bool}\n")
    budget = ["--max_error_fraction", "0.5"]
    runs = {  # case: (exit code, arguments)
        "images": (0, ["--input", folder, *budget]),
        "images_rejected": (1, ["--input", folder, "--max_error_fraction", "0"]),
        "images_uncompressed_indexed": (0, ["--input", folder, *budget, "--compression", "none", "--index"]),
        "images_array_record": (0, ["--input", folder, *budget, "--format", "array_record"]),
        "image_csv": (0, ["--kind", "image_csv", "--input", image_csv, *budget]),
        "csv": (0, ["--config", config, "--input", tables / "*.csv*", *budget]),
    }
    found = {}
    for case, (code, argv) in runs.items():
        out = tmp / "out" / case
        assert main([*map(str, argv), "--output", str(out), "--num_shards", "2"]) == code, case
        [path] = out.glob("manifest*.json")
        found[case] = (path.name, json.loads(path.read_text()))
    return found


def _errors(instance) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(instance)]


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_runs_cover_every_kind_and_option(manifests):
    """What the fixture must produce for the next test to mean something."""
    bodies = [body for _, body in manifests.values()]
    assert {b["kind"] for b in bodies} == set(KINDS)
    assert {b["compression"] for b in bodies} == set(COMPRESSIONS)
    assert {b["file_format"] for b in bodies} == set(FILE_FORMATS)
    assert {name for name, _ in manifests.values()} == {"manifest.json", "manifest.rejected.json"}
    for key in ("copies_files", "warnings", "metadata_files", "rejected", "errors_by_stage", "skipped_by_extension"):
        assert any(b[key] for b in bodies), key
    assert any(split["index_files"] for b in bodies for split in b["splits"].values())
    assert any(b["counts"]["converted"] for b in bodies)


@pytest.mark.parametrize(
    "case", ["images", "images_rejected", "images_uncompressed_indexed", "images_array_record", "image_csv", "csv"]
)
def test_every_manifest_a_run_writes_validates_and_keeps_what_the_schema_says(manifests, case):
    name, body = manifests[case]
    assert _errors(body) == []
    # What the descriptions say that a JSON Schema cannot check.
    assert bool(body["rejected"]) == (name == "manifest.rejected.json")
    counts = body["counts"]
    assert counts["listed"] == counts["written"] + counts["skipped"] + counts["errors"]
    assert sum(body["errors_by_stage"].values()) == counts["errors"]
    assert sum(body["skipped_by_extension"].values()) == counts["skipped"]
    assert sum(split["records"] for split in body["splits"].values()) == counts["written"]
    for split in body["splits"].values():
        assert sum(split["shard_lengths"]) == split["records"]
        assert len(split["shard_lengths"]) == len(split["shards"])
        assert split["index_files"] in ([], [f"index/{shard}.idx" for shard in split["shards"]])
        if body["kind"] != "csv":
            assert sum(split["label_counts"].values()) == split["records"]
    assert Manifest.from_json(json.dumps(body)).counts.reconciles()


def _node(schema: dict) -> dict:
    """A schema with its local `$ref` followed."""
    while "$ref" in schema:
        schema = SCHEMA["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema


def _nested(hint) -> tuple[type, bool] | None:
    """The dataclass a field holds, and whether in an object keyed by name (dict[str, X]); None
    for a field of plain values. `X | None` holds an X."""
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return hint, False
    if typing.get_origin(hint) is dict:
        return (args[1], True) if dataclasses.is_dataclass(args[1]) else None
    held = [a for a in args if dataclasses.is_dataclass(a)]
    return (held[0], False) if held else None


def _drift(cls: type, schema: dict, where: str, keyed: bool) -> list[str]:
    """How the schema of `cls`'s JSON object differs from its fields, recursively. `keyed`: held in
    an object keyed by its `name`, which to_json leaves out of the object itself."""
    node = _node(schema)
    fields = {f.name for f in dataclasses.fields(cls)}
    problems = [f"{where}: keyed by a name it lacks"] if keyed and "name" not in fields else []
    fields -= {"name"} if keyed else set()
    if cls is Manifest:
        fields |= {"format", "format_version"}  # to_json writes them beside the fields
    named, required = set(node["properties"]), set(node.get("required", ()))
    if named != fields:
        problems.append(f"{where}: the schema lacks {sorted(fields - named)}, names {sorted(named - fields)}")
    if required != fields:  # to_json writes every field
        problems.append(f"{where}: required {sorted(required)}, but the code writes {sorted(fields)}")
    if node.get("additionalProperties") is not False:
        problems.append(f"{where}: allows properties the code never writes")
    for name, hint in typing.get_type_hints(cls).items():
        held = _nested(hint)
        if held and name in node["properties"]:
            inner, keyed_by_name = held
            prop = node["properties"][name]
            inner_schema = prop["additionalProperties"] if keyed_by_name else prop
            problems += _drift(inner, inner_schema, f"{where}.{name}", keyed_by_name)
    return problems


def test_the_schema_names_exactly_the_fields_of_the_manifest_dataclasses():
    assert _drift(Manifest, SCHEMA, "manifest", keyed=False) == []


def test_the_schema_knows_the_values_the_code_knows():
    properties = SCHEMA["properties"]
    assert properties["format"]["const"] == FORMAT
    assert properties["format_version"]["enum"] == [FORMAT_VERSION, OTHER_FILE_FORMAT_VERSION]
    assert properties["file_format"]["enum"] == list(FILE_FORMATS)
    assert properties["kind"]["enum"] == list(KINDS) == properties["inputs"]["properties"]["kind"]["enum"]
    assert properties["compression"]["enum"] == list(COMPRESSIONS)
    assert SCHEMA["$defs"]["feature"]["properties"]["dtype"]["enum"] == list(DTYPES)
    array_record, image_kinds = SCHEMA["allOf"]
    assert array_record["if"]["properties"]["file_format"]["const"] == ARRAY_RECORD
    assert array_record["then"]["properties"]["format_version"]["const"] == OTHER_FILE_FORMAT_VERSION
    assert array_record["else"]["properties"]["format_version"]["const"] == FORMAT_VERSION
    image_kinds = image_kinds["else"]
    assert list(properties["image_keys"]["properties"]) == [*DEFAULT_IMAGE_KEYS, *ORIGINAL_SIZE_KEYS]
    assert image_kinds["properties"]["image_keys"]["required"] == list(DEFAULT_IMAGE_KEYS)


def _properties(schema: dict, where: str = ""):
    """(path, schema) of every property the schema describes, its conditions (allOf) aside."""
    for name, prop in schema.get("properties", {}).items():
        yield f"{where}{name}", prop
        yield from _properties(prop, f"{where}{name}.")
    for name, definition in schema.get("$defs", {}).items():
        yield from _properties(definition, f"<{name}>.")


def test_every_property_says_what_it_means():
    undescribed = [path for path, prop in _properties(SCHEMA) if len(prop.get("description", "")) < 10]
    assert undescribed == []


FILE_NAME = jsonschema.Draft202012Validator(SCHEMA["$defs"]["file"])


@given(st.text(st.sampled_from("ab./\\:\n\x00\x7f é"), max_size=12))
def test_a_file_name_is_valid_exactly_when_readers_take_it(name):
    assert FILE_NAME.is_valid(name) == is_contained(name)


def _objects(instance, schema: dict, path=()):
    """(path, schema) of every object in `instance` whose schema requires keys."""
    schema = _node(schema)
    if not isinstance(instance, dict):
        return
    if schema.get("required"):
        yield path, schema
    for key, value in instance.items():
        inner = schema.get("properties", {}).get(key) or schema.get("additionalProperties")
        if isinstance(inner, dict):
            yield from _objects(value, inner, (*path, key))


def _at(body: dict, path) -> dict:
    for key in path:
        body = body[key]
    return body


def _json_types(schema: dict) -> set[str]:
    """The JSON types a property's schema allows (`number` takes integers too)."""
    schema = _node(schema)
    if "type" in schema:
        types = {schema["type"]} if isinstance(schema["type"], str) else set(schema["type"])
    else:
        types = {JSON_TYPES[type(value)] for value in (schema["enum"] if "enum" in schema else [schema["const"]])}
    return types | ({"integer"} if "number" in types else set())


JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
OTHER_VALUES = {
    "string": st.text(max_size=5),
    "integer": st.integers(),
    "number": st.floats(allow_nan=False).filter(lambda f: not f.is_integer()),
    "boolean": st.booleans(),
    "null": st.none(),
    "array": st.lists(st.integers(), max_size=2),
    "object": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_manifest_missing_a_key_is_refused(manifests, data):
    _, body = manifests[data.draw(st.sampled_from(sorted(manifests)))]
    path, schema = data.draw(st.sampled_from(list(_objects(body, SCHEMA))))
    key = data.draw(st.sampled_from(schema["required"]))
    broken = copy.deepcopy(body)
    del _at(broken, path)[key]
    assert _errors(broken), f"{'/'.join(path)} without {key!r} validates"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_manifest_with_a_value_of_another_type_is_refused(manifests, data):
    _, body = manifests[data.draw(st.sampled_from(sorted(manifests)))]
    path, schema = data.draw(st.sampled_from(list(_objects(body, SCHEMA))))
    key = data.draw(st.sampled_from(sorted(schema["properties"])))
    other = sorted(set(OTHER_VALUES) - _json_types(schema["properties"][key]))
    broken = copy.deepcopy(body)
    _at(broken, path)[key] = value = data.draw(st.sampled_from(other).flatmap(OTHER_VALUES.__getitem__))
    assert _errors(broken), f"{'/'.join(path)}: {key!r} = {value!r} validates"


def test_the_reference_page_holds_the_schema_as_it_is():
    page = REPO / "docs" / "output.md"
    assert manifest_reference.with_reference(page.read_text(), SCHEMA) == page.read_text(), (
        "regenerate: python scripts/manifest_reference.py"
    )
    checked = subprocess.run(
        [sys.executable, REPO / "scripts" / "manifest_reference.py", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
