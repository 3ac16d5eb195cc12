"""How many shards a split gets: a pure function of its size, decided before the pipeline runs."""

from __future__ import annotations

import dataclasses
import logging
import math

MIB = 1 << 20
# The most shards a split can have: shard names hold 5 digits (`train-SSSSS-of-NNNNN`,
# core.contract.layout.ShardedFileTemplate).
MAX_SHARDS = 99_999
# The largest shard size that may be asked for: a TiB (GCS holds objects of up to 5 TiB).
MAX_SHARD_MIB = 1 << 20

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ShardConfig:
    """Shard sizing. Files of ~100-200 MB stream well from GCS; every reading host wants at least
    `shards_per_host` files so its interleave has parallelism, but not files so small that
    per-file overhead dominates (`min_shard_mib`)."""

    target_shard_mib: float = 128.0
    min_shard_mib: float = 10.0
    shards_per_host: int = 10
    reader_hosts: int = 1
    num_shards: int = 0  # > 0 overrides everything

    def __post_init__(self):
        if not (0 < self.target_shard_mib <= MAX_SHARD_MIB and 0 < self.min_shard_mib <= MAX_SHARD_MIB):
            raise ValueError(f"target_shard_mib and min_shard_mib must be positive, at most {MAX_SHARD_MIB}")
        if self.shards_per_host < 1 or self.reader_hosts < 1 or not 0 <= self.num_shards <= MAX_SHARDS:
            raise ValueError(f"shards_per_host and reader_hosts must be >= 1, num_shards 0 to {MAX_SHARDS}")


def shard_count(split_bytes: int, config: ShardConfig) -> int:
    """Shards for a split of `split_bytes`: enough to keep each near the target size, raised to
    shards_per_host * reader_hosts as long as shards stay >= min_shard_mib, and at least 1; never
    more than MAX_SHARDS, whose shards then pass the target size (a warning says so)."""
    if config.num_shards:
        return config.num_shards
    by_size = math.ceil(split_bytes / (config.target_shard_mib * MIB))
    for_readers = min(config.shards_per_host * config.reader_hosts, int(split_bytes // (config.min_shard_mib * MIB)))
    wanted = max(1, by_size, for_readers)
    if wanted > MAX_SHARDS:
        _LOG.warning(
            "a split of %.1f GiB would take %d shards, more than the %d that shard names hold: writing %d of about "
            "%.0f MiB each",
            split_bytes / (1 << 30),
            wanted,
            MAX_SHARDS,
            MAX_SHARDS,
            split_bytes / MAX_SHARDS / MIB,
        )
    return min(wanted, MAX_SHARDS)
