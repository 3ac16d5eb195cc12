import pytest

from pipeline.commands.convert import parser
from pipeline.config import ConfigError, load_config
from pipeline.flags import config_overrides


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_point_at_the_bundled_sample():
    config = load_config()
    assert (
        config.kind == "images" and config.input_uri.endswith("sample/images") and config.output_uri == "output/sample"
    )
    assert config.split_fractions == (("train", 0.8), ("validation", 0.2))


def test_yaml_then_flags(tmp_path):
    path = write(tmp_path, "kind: csv\nsplits: {train: 0.5, test: 0.5}\nsharding: {reader_hosts: 4, num_shards: 3}\n")
    args, rest = parser().parse_known_args(
        ["--config", path, "--num_shards", "5", "--runner", "DirectRunner", "--splits", "train=0.9,validation=0.1"]
    )
    config = load_config(args.config, config_overrides(args))
    assert rest == ["--runner", "DirectRunner"]
    assert config.kind == "csv"
    assert config.sharding.num_shards == 5 and config.sharding.reader_hosts == 4  # flag wins, YAML kept
    assert dict(config.splits) == {"train": 0.9, "validation": 0.1}  # replaced whole, not merged


@pytest.mark.parametrize(
    "text, message",
    [
        ("kind: movies\n", "kind: should be .*got 'movies'"),
        ("splits: {train: 0.7, validation: 0.2}\n", "sum to 1"),
        ("shardng: {num_shards: 2}\n", "unknown key"),
        ("sharding: {num_shards: -1}\n", "num_shards"),
        ("image: {keys: {picture: x}}\n", "unknown roles"),
        ("csv: {schema: {a: integer}}\n", "csv.schema"),
        ("splits: {Train: 1.0}\n", "Train"),
    ],
)
def test_bad_configs_say_what_is_wrong(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_every_shipped_config_loads():
    import pathlib

    configs = sorted((pathlib.Path(__file__).parents[2] / "configs").glob("*.yaml"))
    assert configs
    for path in configs:
        load_config(str(path))


@pytest.mark.parametrize("key", ["read_threads", "read_batch"])
def test_image_reading_needs_a_thread_and_a_batch(key):
    with pytest.raises(ConfigError, match=f"image.{key}: should be greater than or equal to 1, got 0"):
        load_config(None, {"image": {key: 0}})
