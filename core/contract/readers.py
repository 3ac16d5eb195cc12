"""Giving each of N readers (hosts, input pipelines, DataLoader workers) a disjoint set of a
split's shards, balanced by the records the manifest counts in each (`shard_lengths`).

Pure and deterministic, so every reader computes the same assignment without talking to the
others: the trainer uses it per input pipeline, and a PyTorch `IterableDataset` can use it per
DataLoader worker (README, "Reading the output").
"""

from __future__ import annotations

from collections.abc import Sequence


def assign_shards(lengths: Sequence[int], readers: int) -> list[list[int]]:
    """Shard indexes per reader: largest first onto the reader with the fewest records, ties to
    the lowest index. Each list is in shard order; a reader gets none only when there are fewer
    shards than readers."""
    if readers < 1:
        raise ValueError(f"readers must be >= 1, got {readers}")
    loads = [0] * readers
    assigned: list[list[int]] = [[] for _ in range(readers)]
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        target = min(range(readers), key=lambda r: (loads[r], len(assigned[r]), r))
        assigned[target].append(index)
        loads[target] += lengths[index]
    return [sorted(shards) for shards in assigned]
