"""Pure-Python reference kernels for LPT and Karmarkar–Karp (internal).

These are the readable definitions of the algorithms and the fallback when numba is not
available. :mod:`gpubalance.balance.partition.kernels_numba` implements exactly the same
steps (same tie-breaking, same floating-point operations in the same order), and the tests
check that both give identical assignments.

All kernels take ``order``: item indices sorted by cost, largest first (ties by index), and
``costs``: float64 seconds per item. They return ``rank`` (int64, one per item).
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["kk_assign_py", "lpt_assign_py", "lpt_rounds_assign_py"]


def lpt_assign_py(order: np.ndarray, costs: np.ndarray, k: int) -> np.ndarray:
    """Longest processing time first: each item goes to the least-loaded rank.

    Ties between equally loaded ranks go to the lowest rank index.
    """
    rank = np.empty(costs.shape[0], dtype=np.int64)
    heap = [(0.0, r) for r in range(k)]
    for i in order.tolist():
        load, r = heap[0]
        rank[i] = r
        heapq.heapreplace(heap, (load + float(costs[i]), r))
    return rank


def lpt_rounds_assign_py(order: np.ndarray, costs: np.ndarray, k: int) -> np.ndarray:
    """Count-constrained LPT: rounds of ``k`` items, each rank takes exactly one per round.

    Within a round the items (largest first) go to the ranks in ascending order of load at
    the start of the round (ties: lower rank first). This equals sequential LPT restricted
    to the ranks holding the fewest items, so rank item counts differ by at most one.
    """
    n = costs.shape[0]
    rank = np.empty(n, dtype=np.int64)
    loads = [0.0] * k
    idx = order.tolist()
    for start in range(0, n, k):
        by_load = sorted(range(k), key=lambda r: (loads[r], r))
        for j, i in enumerate(idx[start : start + k]):
            r = by_load[j]
            rank[i] = r
            loads[r] = loads[r] + float(costs[i])
    return rank


def kk_assign_py(order: np.ndarray, costs: np.ndarray, k: int, group: int) -> np.ndarray:
    """k-way Karmarkar–Karp largest differencing method.

    A node is a k-tuple of subset sums (sorted descending, minimum subtracted) with the
    items of each subset. The two nodes with the largest difference (max - min) are merged
    by joining the largest subset of one with the smallest of the other, and so on; until
    one node is left, whose subsets are the ranks (subset 0 -> rank 0, the heaviest).

    ``group == 1``: every item starts as its own node ``(x, 0, ..., 0)``.
    ``group == k``: balanced (BLDM): the sorted items start in nodes of ``k`` consecutive
    items, one per subset (the last node padded with empty subsets), so every rank ends
    with the same number of items (within one).

    Selection: the node with the largest difference; ties prefer merged nodes over
    untouched singletons, then the earlier-created node.
    """
    n = costs.shape[0]
    rank = np.empty(n, dtype=np.int64)
    if k == 1 or n == 0:
        rank[:] = 0
        return rank
    idx = order.tolist()
    # heap entries: (-diff, seq, values, members)
    heap: list[tuple[float, int, list[float], list[list[int]]]] = []
    seq = 0
    stream: list[int] = []
    if group == 1:
        stream = idx
    else:
        for start in range(0, n, k):
            chunk = idx[start : start + k]
            vals = [float(costs[i]) for i in chunk] + [0.0] * (k - len(chunk))
            members = [[i] for i in chunk] + [[] for _ in range(k - len(chunk))]
            low = vals[k - 1]
            vals = [v - low for v in vals]
            heapq.heappush(heap, (-(vals[0] - vals[k - 1]), seq, vals, members))
            seq += 1
    pos = 0

    def take() -> tuple[list[float], list[list[int]]]:
        nonlocal pos
        if pos < len(stream):
            x = float(costs[stream[pos]])
            if not heap or -heap[0][0] < x:
                item = stream[pos]
                pos += 1
                return [x] + [0.0] * (k - 1), [[item]] + [[] for _ in range(k - 1)]
        _, _, vals, members = heapq.heappop(heap)
        return vals, members

    while len(heap) + (len(stream) - pos) > 1:
        a_vals, a_mem = take()
        b_vals, b_mem = take()
        new_vals = [a_vals[j] + b_vals[k - 1 - j] for j in range(k)]
        new_mem = [a_mem[j] + b_mem[k - 1 - j] for j in range(k)]
        perm = sorted(range(k), key=lambda j: -new_vals[j])
        low = new_vals[perm[k - 1]]
        vals = [new_vals[j] - low for j in perm]
        members = [new_mem[j] for j in perm]
        heapq.heappush(heap, (-(vals[0] - vals[k - 1]), seq, vals, members))
        seq += 1
    if heap:
        _, _, _, members = heap[0]
        for r, mem in enumerate(members):
            for i in mem:
                rank[i] = r
    else:  # a single item
        rank[stream[0]] = 0
    return rank
