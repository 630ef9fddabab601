"""LPT (longest processing time first): largest items first, each to the least-loaded rank.

Graham's bound: makespan <= (4/3 - 1/(3k)) x optimum. With ``equal_counts`` items are
dealt in rounds of ``k`` (largest first, each rank one item per round, lightest rank
first), so rank item counts differ by at most one, then pairwise swaps refine the result (see
:mod:`.refine`). O(n log n) for the sort plus
O(n log k) (O(n) per round-robin of k with ``equal_counts``).
"""

from __future__ import annotations

import numpy as np

from gpubalance.balance.partition.base import Partitioner, descending_order, kernel_backend

__all__ = ["LptPartitioner"]


class LptPartitioner(Partitioner):
    """Greedy LPT; ties between equally loaded ranks go to the lower rank index."""

    name = "lpt"

    def assign(self, costs_s: np.ndarray, k: int) -> np.ndarray:
        order = descending_order(costs_s)
        if kernel_backend(self.backend) == "numba":
            from gpubalance.balance.partition import kernels_numba as nb

            fn = nb.lpt_rounds_assign_nb if self.equal_counts else nb.lpt_assign_nb
            return np.asarray(fn(order, costs_s, k), dtype=np.int64)
        from gpubalance.balance.partition import kernels_py as py

        if self.equal_counts:
            return py.lpt_rounds_assign_py(order, costs_s, k)
        return py.lpt_assign_py(order, costs_s, k)
