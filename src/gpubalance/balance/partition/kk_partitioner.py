"""k-way Karmarkar–Karp (largest differencing method).

Each item starts as a k-tuple ``(x, 0, ..., 0)``; the two tuples with the largest spread
(max - min) are repeatedly merged, pairing the largest subset of one with the smallest of
the other, until one tuple is left: its subsets are the ranks. Usually much closer to the
optimum than LPT on many items (Michiels et al. bound: 4/3 - 1/(3(k-1)) for k >= 3).

With ``equal_counts`` this is the balanced variant (BLDM): the sorted items start in
tuples of ``k`` consecutive items, one per subset, so every rank gets the same number of
items (within one); pairwise swaps then refine the result (see :mod:`.refine`).
O(n log n + n k log k) worst case; merged tuples are few in practice.
"""

from __future__ import annotations

import numpy as np

from gpubalance.balance.partition.base import Partitioner, descending_order, kernel_backend

__all__ = ["KarmarkarKarpPartitioner"]


class KarmarkarKarpPartitioner(Partitioner):
    """Largest differencing; rank 0 gets the heaviest subset."""

    name = "kk"

    def assign(self, costs_s: np.ndarray, k: int) -> np.ndarray:
        order = descending_order(costs_s)
        group = k if self.equal_counts else 1
        if kernel_backend(self.backend) == "numba":
            from gpubalance.balance.partition import kernels_numba as nb

            return np.asarray(nb.kk_assign_nb(order, costs_s, k, group), dtype=np.int64)
        from gpubalance.balance.partition import kernels_py as py

        return py.kk_assign_py(order, costs_s, k, group)
