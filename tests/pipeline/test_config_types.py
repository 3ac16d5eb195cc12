"""Every setting is checked by type and range when the config is loaded, and a bad one is a
ConfigError of one line naming the file or flag, the key, the value and what was expected."""

import dataclasses
import json
import pickle

import pydantic
import pytest
from PIL import Image

from pipeline.commands.convert import parser
from pipeline.config import IMAGE_EXTENSIONS, ConfigError, load_config, to_dict
from pipeline.flags import config_overrides
from pipeline.sharding import ShardConfig, shard_count

LIMIT = min(Image.MAX_IMAGE_PIXELS, (1 << 27) - 1)  # transforms.image_check.LIMIT: Pillow's and TF's


def write(tmp_path, text):
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return str(path)


def refused(path=None, overrides=None) -> str:
    with pytest.raises(ConfigError) as raised:
        load_config(path, overrides)
    message = str(raised.value)
    assert "\n" not in message, message
    return message


BOOLEAN = "should be true or false (a YAML boolean, unquoted)"


@pytest.mark.parametrize(
    "text, expected",
    [
        # a quoted "no" is a truthy string: it would overwrite
        ('overwrite: "no"\n', f"overwrite: {BOOLEAN}, got 'no' (a string)"),
        ("overwrite: 0\n", f"overwrite: {BOOLEAN}, got 0"),
        ("overwrite: null\n", f"overwrite: {BOOLEAN}, got None"),
        ("image: {read_threads: 2.5}\n", "image.read_threads: should be an integer, got 2.5"),
        ("image: {read_batch: 32.0}\n", "image.read_batch: should be an integer, got 32.0"),
        ('sharding: {num_shards: "4"}\n', "sharding.num_shards: should be an integer, got '4' (a string)"),
        ("sharding: {reader_hosts: true}\n", "sharding.reader_hosts: should be an integer, got True"),
        ("sharding: {reader_hosts: 0}\n", "sharding.reader_hosts: should be greater than or equal to 1, got 0"),
        ("sharding: {shards_per_host: 0}\n", "sharding.shards_per_host: should be greater than or equal to 1, got 0"),
        ("sharding: {num_shards: -1}\n", "sharding.num_shards: should be greater than or equal to 0, got -1"),
        ("sharding: {target_shard_mib: 0}\n", "sharding.target_shard_mib: should be greater than 0, got 0"),
        ('sharding: {min_shard_mib: "10"}\n', "sharding.min_shard_mib: should be a number, got '10' (a string)"),
        ("sharding: 3\n", "sharding: should be a mapping, got 3"),
        ('max_error_fraction: "0.1"\n', "max_error_fraction: should be a number, got '0.1' (a string)"),
        ("max_error_fraction: 1.5\n", "max_error_fraction: should be less than or equal to 1, got 1.5"),
        ("max_error_fraction: -0.1\n", "max_error_fraction: should be greater than or equal to 0, got -0.1"),
        ("max_error_fraction: .nan\n", "max_error_fraction: should be a finite number, got nan"),
        ("splits: {train: 1.5, validation: -0.5}\n", "splits.train: should be less than or equal to 1, got 1.5"),
        ("splits: {train: 1.5, validation: -0.5}\n", "splits.validation: should be greater than 0, got -0.5"),
        ('splits: {train: "0.8", validation: 0.2}\n', "splits.train: should be a number, got '0.8' (a string)"),
        ("splits: {}\n", "splits: split fractions must be positive and sum to 1, got {}"),
        ("splits: [train]\n", "splits: should be a mapping, got ['train']"),
        ("input: 42\n", "input: should be a string, got 42"),
        ("image: {max_pixels: 1.0e+6}\n", "image.max_pixels: should be an integer, got 1000000.0"),
        ("image: {max_pixels: 0}\n", "image.max_pixels: should be greater than or equal to 1, got 0"),
        (
            f"image: {{max_pixels: {LIMIT + 1}}}\n",
            f"image.max_pixels: should be less than or equal to {LIMIT}",
        ),
        ("image: {max_file_mib: 2047}\n", "image.max_file_mib: should be less than or equal to 2046, got 2047"),
        ("image: {extensions: jpg}\n", "image.extensions: should be a list of extensions, e.g. [.jpg, .png]"),
        ("image: {extensions: []}\n", "image.extensions: should have at least 1 item(s), got []"),
        ("image: {extensions: [.jpg, 7]}\n", "image.extensions.1: should be a string, got 7"),
        ('image: {extensions: [.jpg, "*.png"]}\n', "image.extensions: '*.png' is not a file extension like .jpg"),
        ("image: {extensions: [.tar.gz]}\n", "image.extensions: '.tar.gz' is not a file extension like .jpg"),
        ("image: {extensions: [.]}\n", "image.extensions: '.' is not a file extension like .jpg"),
        ("image: {keys: {encoded: 7}}\n", "image.keys.encoded: should be a string, got 7"),
        ('image: {keys: {encoded: ""}}\n', "image.keys.encoded: String should have at least 1 character"),
        ("image: {keys: {encoded: image/format}}\n", "image.keys: two roles would write the same feature key"),
        ('image_csv: {uri_column: ""}\n', "image_csv.uri_column: String should have at least 1 character"),
        ("image_csv: {label_column: 3}\n", "image_csv.label_column: should be a string, got 3"),
        ("csv: {schema: {price: double}}\n", "csv.schema.price: should be 'int64', 'float32', 'string' or 'bool'"),
        ("csv: {schema: [price]}\n", "csv.schema: should be a mapping, got ['price']"),
        ("kind: 3\n", "kind: should be 'images', 'image_csv' or 'csv', got 3"),
    ],
)
def test_a_setting_of_the_wrong_type_or_range_is_refused_naming_file_key_and_value(tmp_path, text, expected):
    path = write(tmp_path, text)
    message = refused(path)
    assert f"config {path}: {expected}" in message, message


@pytest.mark.parametrize(
    "text, expected",
    [
        ("shardng: {num_shards: 2}\n", "shardng: unknown key; did you mean 'sharding'?"),
        ("image: {read_thread: 2}\n", "image.read_thread: unknown key; did you mean 'read_threads'?"),
        ("sharding: {num_shard: 2}\n", "sharding.num_shard: unknown key; did you mean 'num_shards'?"),
        ("csv: {shema: {a: bool}}\n", "csv.shema: unknown key; did you mean 'schema'?"),
        ("colour: red\n", "colour: unknown key; known keys here: kind, input, output, splits, sharding,"),
    ],
)
def test_unknown_keys_are_refused_with_the_closest_known_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    message = refused(path)
    assert f"config {path}: {expected}" in message, message


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path):
    path = write(tmp_path, "- kind: csv\n")
    assert refused(path) == f"config {path}: should be a mapping of settings, got list"


def test_invalid_yaml_is_one_line(tmp_path):
    path = write(tmp_path, "image: {read_threads: [\n")
    assert refused(path).startswith(f"config {path} is not valid YAML: ")


def test_every_problem_is_reported_on_one_line(tmp_path):
    path = write(tmp_path, 'overwrite: "yes"\nimage: {read_threads: 2.5}\n')
    problems = refused(path).split("; ")
    assert [p.split(": ")[1] for p in problems] == ["overwrite", "image.read_threads"]
    assert all(p.startswith(f"config {path}: ") for p in problems)


def test_extensions_are_normalised_to_lower_case_with_a_dot(tmp_path):
    config = load_config(write(tmp_path, "image: {extensions: [jpg, .JPEG, ' png', .png]}\n"))
    assert config.image.extensions == (".jpg", ".jpeg", ".png")
    assert load_config().image.extensions == IMAGE_EXTENSIONS


def test_yaml_numbers_and_booleans_are_accepted_as_written(tmp_path):
    path = write(
        tmp_path,
        "overwrite: true\nsplits: {train: 1}\nmax_error_fraction: 0\n"
        "sharding: {target_shard_mib: 64, min_shard_mib: 2.5, num_shards: 3}\n"
        f"image: {{max_pixels: {LIMIT}}}\n",
    )
    config = load_config(path)
    assert config.overwrite is True and config.splits == {"train": 1.0} and config.max_error_fraction == 0
    assert config.sharding.target_shard_mib == 64 and isinstance(config.sharding.target_shard_mib, float)
    assert config.sharding.num_shards == 3 and config.image.max_pixels == LIMIT


def convert_flags(*argv):
    args, _ = parser().parse_known_args(list(argv))
    return args.config, config_overrides(args)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["--num_shards", "-1"],
            "flag --num_shards: sharding.num_shards: should be greater than or equal to 0, got -1",
        ),
        (["--reader_hosts", "0"], "flag --reader_hosts: sharding.reader_hosts: should be greater than or equal to 1"),
        (["--target_shard_mib", "0"], "flag --target_shard_mib: sharding.target_shard_mib: should be greater than 0"),
        (
            ["--target_shard_mib", "inf"],
            "flag --target_shard_mib: sharding.target_shard_mib: should be a finite number",
        ),
        (["--max_error_fraction", "2"], "flag --max_error_fraction: should be less than or equal to 1, got 2.0"),
        (["--splits", "train=0.5,validation=0.2"], "flag --splits: split fractions must be positive and sum to 1"),
        (["--splits", "train=0.9,validation=-0.1"], "flag --splits: splits.validation: should be greater than 0"),
        (["--splits", "Train=1"], "flag --splits: split name 'Train' must match"),
    ],
)
def test_flags_are_checked_the_same_way_and_named(argv, expected):
    message = refused(*convert_flags(*argv))
    assert message.startswith(expected), message


def test_a_problem_in_the_file_names_the_file_even_with_flags_given(tmp_path):
    path = write(tmp_path, "image: {read_threads: 2.5}\nsharding: {reader_hosts: 2}\n")
    message = refused(*convert_flags("--config", path, "--num_shards", "3"))
    assert message == f"config {path}: image.read_threads: should be an integer, got 2.5"


def test_a_flag_replaces_a_bad_value_in_the_file(tmp_path):
    path = write(tmp_path, 'sharding: {num_shards: "4"}\noverwrite: "no"\n')
    config = load_config(*convert_flags("--config", path, "--num_shards", "5", "--overwrite"))
    assert config.sharding.num_shards == 5 and config.overwrite is True


def test_overrides_that_are_no_flag_are_named_as_overrides():
    assert refused(None, {"image": {"read_threads": "2"}}).startswith("overrides: image.read_threads: ")


def test_the_config_keeps_its_shape_for_the_manifest_and_the_job():
    config = load_config(None, {"csv": {"schema": {"a": "int64"}}, "sharding": {"num_shards": 2}})
    assert isinstance(config.sharding, ShardConfig) and dataclasses.is_dataclass(config.sharding)
    assert shard_count(1 << 40, config.sharding) == 2
    assert config.csv.schema == {"a": "int64"}
    settings = json.loads(json.dumps(to_dict(config)))
    assert settings == {
        "kind": "images",
        "input": "",
        "output": "",
        "splits": {"train": 0.8, "validation": 0.2},
        "sharding": {
            "target_shard_mib": 128.0,
            "min_shard_mib": 10.0,
            "shards_per_host": 10,
            "reader_hosts": 1,
            "num_shards": 2,
        },
        "max_error_fraction": 0.01,
        "overwrite": False,
        "allow_other_files": False,
        "format": "tfrecord",
        "compression": "gzip",
        "index": False,
        "lease_seconds": 300,
        "listing_threads": 16,
        "image": {
            "extensions": list(IMAGE_EXTENSIONS),
            "max_pixels": 89_478_485,
            "max_file_mib": 1024,
            "read_threads": 4,
            "read_batch": 32,
            "local_processes": "auto",
            "local_write_while_reading": True,
            "keys": dict(config.image_keys),
            "label_offset": 0,
            "jpeg_only": False,
            "jpeg_quality": 95,
            "alpha": "composite",
            "exif_orientation": "keep",
            "layout": "auto",
            "min_side": 1,
            "resize": {"shorter_side": None, "longer_side": None},
        },
        "image_csv": {"uri_column": "image_uri", "label_column": "label", "split_column": "split", "roots": []},
        "csv": {
            "schema": {"a": "int64"},
            "delimiter": "auto",
            "decimal": "auto",
            "header": "auto",
            "columns": [],
            "label": "auto",
        },
        "hold": {
            "enabled": True,
            "records_drop": 0.2,
            "min_records": 1000,
            "label_linf": 0.1,
            "numeric_js": 0.1,
            "error_growth": 3.0,
            "min_error_fraction": 0.001,
        },
    }
    assert pickle.loads(pickle.dumps(config)) == config  # Beam pickles what it ships to workers
    with pytest.raises(pydantic.ValidationError):
        config.overwrite = True  # frozen, as before
