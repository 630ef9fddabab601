"""Greedy packing of an ordered item sequence into micro-batches (internal).

Both versions walk the items in the given order and close the current batch when adding
the next item would break a limit: ``count x max cost``, ``count x max token measure`` or
``count``. Greedy maximal runs give the fewest batches among splits into consecutive
runs. Returns the start offset of every batch (into ``order``), plus ``len(order)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pack_greedy_py", "pack_two_pointer_py"]


def pack_greedy_py(
    order: np.ndarray,
    costs: np.ndarray,
    measure: np.ndarray,
    max_cost: float,
    max_tok: float,
    max_items: int,
) -> np.ndarray:
    """Reference: batch boundaries (int64 offsets, first 0, last len(order))."""
    starts = [0]
    count = 0
    mc = 0.0
    mt = 0.0
    for t, i in enumerate(order.tolist()):
        c = float(costs[i])
        m = float(measure[i])
        nc = c if c > mc else mc
        nt = m if m > mt else mt
        if count > 0 and (
            count + 1 > max_items or (count + 1) * nc > max_cost or (count + 1) * nt > max_tok
        ):
            starts.append(t)
            count, mc, mt = 1, c, m
        else:
            count, mc, mt = count + 1, nc, nt
    if order.shape[0] == 0:
        return np.zeros(1, dtype=np.int64)
    starts.append(int(order.shape[0]))
    return np.asarray(starts, dtype=np.int64)


def pack_two_pointer_py(
    order: np.ndarray,
    costs: np.ndarray,
    measure: np.ndarray,
    max_cost: float,
    max_tok: float,
    max_items: int,
) -> list[list[int]]:
    """Packed (unpadded) batches: sums of cost and measure under the limits.

    ``order`` is largest first. Each batch takes the largest remaining items while they
    fit, then fills the room left with the smallest remaining items (from the other end).
    O(n); every batch but the last is full to within one smallest item.
    """
    idx = order.tolist()
    lo, hi = 0, len(idx) - 1
    out: list[list[int]] = []
    while lo <= hi:
        batch: list[int] = []
        sc = 0.0
        sm = 0.0
        while lo <= hi and len(batch) < max_items:
            i = idx[lo]
            if batch and (sc + costs[i] > max_cost or sm + measure[i] > max_tok):
                break
            batch.append(i)
            sc += float(costs[i])
            sm += float(measure[i])
            lo += 1
        while lo <= hi and len(batch) < max_items:
            i = idx[hi]
            if sc + costs[i] > max_cost or sm + measure[i] > max_tok:
                break
            batch.append(i)
            sc += float(costs[i])
            sm += float(measure[i])
            hi -= 1
        out.append(batch)
    return out
