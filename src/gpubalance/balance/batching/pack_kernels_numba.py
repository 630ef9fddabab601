"""numba version of :func:`gpubalance.balance.batching.pack_kernels.pack_greedy_py`.

Importing compiles nothing; the kernel is compiled on first call and cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["pack_greedy_nb"]


@numba.njit(cache=True, nogil=True)
def pack_greedy_nb(
    order: np.ndarray,
    costs: np.ndarray,
    measure: np.ndarray,
    max_cost: float,
    max_tok: float,
    max_items: int,
) -> np.ndarray:  # pragma: no cover
    """Batch boundaries (int64 offsets into ``order``, first 0, last len(order))."""
    n = order.shape[0]
    starts = np.empty(n + 2, dtype=np.int64)
    starts[0] = 0
    nb = 1
    count = 0
    mc = 0.0
    mt = 0.0
    for t in range(n):
        i = order[t]
        c = costs[i]
        m = measure[i]
        nc = c if c > mc else mc
        nt = m if m > mt else mt
        if count > 0 and (
            count + 1 > max_items or (count + 1) * nc > max_cost or (count + 1) * nt > max_tok
        ):
            starts[nb] = t
            nb += 1
            count = 1
            mc = c
            mt = m
        else:
            count += 1
            mc = nc
            mt = nt
    if n == 0:
        return starts[:1].copy()
    starts[nb] = n
    return starts[: nb + 1].copy()
