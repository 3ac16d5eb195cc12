import pytest

from pipeline.sharding import MIB, ShardConfig, shard_count


@pytest.mark.parametrize(
    "split_mib, config, expected",
    [
        (0, ShardConfig(), 1),  # empty split still gets one file
        (1, ShardConfig(), 1),  # small: one shard, never below 10 MiB to reach 10 per host
        (35, ShardConfig(), 3),  # 3 shards of ~11.7 MiB
        (141, ShardConfig(), 10),  # 10 per host reached while shards stay >= 10 MiB
        (10_000, ShardConfig(), 79),  # size-bound: ceil(10000 / 128)
        (10_000, ShardConfig(reader_hosts=16), 160),  # 16 hosts x 10 shards of 62.5 MiB
        (500, ShardConfig(reader_hosts=64), 50),  # hosts want 640, but 10 MiB floor caps at 50
        (10_000, ShardConfig(target_shard_mib=200), 50),
        (10_000, ShardConfig(num_shards=7), 7),  # explicit override wins
    ],
)
def test_shard_count(split_mib, config, expected):
    assert shard_count(int(split_mib * MIB), config) == expected


def test_shards_stay_near_target_size():
    config = ShardConfig()
    for total_mib in (129, 1000, 123_456):
        shards = shard_count(total_mib * MIB, config)
        assert total_mib / shards <= config.target_shard_mib


@pytest.mark.parametrize("bad", [dict(target_shard_mib=0), dict(reader_hosts=0), dict(num_shards=-1)])
def test_invalid_shard_config(bad):
    with pytest.raises(ValueError):
        ShardConfig(**bad)
