"""Count-based round robin: what ``torch.utils.data.DistributedSampler`` does.

Items are taken in the given order and padded, as DistributedSampler does with
``drop_last=False``, by repeating items from the start until the total is a multiple of
``k``; placement ``i`` of the padded list goes to rank ``i % k``. Every rank gets
``ceil(n / k)`` placements; cost is ignored. This is the baseline the cost-based
policies are compared with.
"""

from __future__ import annotations

import math

import numpy as np

from gpubalance.balance.partition.base import Partition, Partitioner, check_costs

__all__ = ["CountPartitioner", "round_robin_indices"]


def round_robin_indices(n: int, k: int) -> np.ndarray:
    """The padded index list of DistributedSampler(shuffle=False, drop_last=False)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    total = math.ceil(n / k) * k
    idx = np.arange(n, dtype=np.int64)
    reps = math.ceil(total / n)
    return np.tile(idx, reps)[:total]


class CountPartitioner(Partitioner):
    """Round robin by count with DistributedSampler padding (``equal_counts`` is implied)."""

    name = "count"

    def assign(self, costs_s: np.ndarray, k: int) -> np.ndarray:
        """Rank ``i % k`` of each item (the unpadded assignment)."""
        return np.arange(costs_s.shape[0], dtype=np.int64) % k

    def partition(self, costs_s: np.ndarray | list[float], k: int) -> Partition:
        """Padded round robin: placements repeat items so all ranks hold ceil(n/k)."""
        costs = check_costs(costs_s, k)
        idx = round_robin_indices(costs.shape[0], int(k))
        rank = np.arange(idx.shape[0], dtype=np.int64) % k
        return Partition(int(k), idx, rank, costs, self.name)
