"""numba-compiled LPT and Karmarkar–Karp kernels (internal).

Importing this module imports numba but compiles nothing: the functions are compiled on
first call (and cached on disk with ``cache=True``). They follow
:mod:`gpubalance.balance.partition.kernels_py` step for step, with the same tie-breaking
and the same floating-point operations, so both give identical assignments; the reference
module documents the algorithms.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["kk_assign_nb", "lpt_assign_nb", "lpt_rounds_assign_nb"]


@numba.njit(cache=True, nogil=True)
def _before(load_a: float, id_a: int, load_b: float, id_b: int) -> bool:  # pragma: no cover
    return load_a < load_b or (load_a == load_b and id_a < id_b)


@numba.njit(cache=True, nogil=True)
def lpt_assign_nb(order: np.ndarray, costs: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover
    """LPT with a binary min-heap of (load, rank)."""
    n = costs.shape[0]
    rank = np.empty(n, dtype=np.int64)
    hload = np.zeros(k, dtype=np.float64)
    hrank = np.arange(k).astype(np.int64)
    for t in range(order.shape[0]):
        i = order[t]
        r = hrank[0]
        rank[i] = r
        load = hload[0] + costs[i]
        # sift down the root with its new load
        pos = 0
        while True:
            child = 2 * pos + 1
            if child >= k:
                break
            right = child + 1
            if right < k and _before(hload[right], hrank[right], hload[child], hrank[child]):
                child = right
            if _before(hload[child], hrank[child], load, r):
                hload[pos] = hload[child]
                hrank[pos] = hrank[child]
                pos = child
            else:
                break
        hload[pos] = load
        hrank[pos] = r
    return rank


@numba.njit(cache=True, nogil=True)
def lpt_rounds_assign_nb(
    order: np.ndarray, costs: np.ndarray, k: int
) -> np.ndarray:  # pragma: no cover
    """Count-constrained LPT in rounds of k items (see the reference kernel)."""
    n = costs.shape[0]
    rank = np.empty(n, dtype=np.int64)
    loads = np.zeros(k, dtype=np.float64)
    by_load = np.arange(k).astype(np.int64)
    for start in range(0, n, k):
        # stable insertion sort of ranks by (load, rank); loads change little per round
        for a in range(1, k):
            r = by_load[a]
            b = a - 1
            while b >= 0 and _before(loads[r], r, loads[by_load[b]], by_load[b]):
                by_load[b + 1] = by_load[b]
                b -= 1
            by_load[b + 1] = r
        stop = min(start + k, n)
        for t in range(start, stop):
            i = order[t]
            r = by_load[t - start]
            rank[i] = r
            loads[r] = loads[r] + costs[i]
    return rank


@numba.njit(cache=True, nogil=True)
def _first(diff: np.ndarray, seq: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover
    """Node a is taken before node b: larger difference, then earlier creation."""
    return diff[a] > diff[b] or (diff[a] == diff[b] and seq[a] < seq[b])


@numba.njit(cache=True, nogil=True)
def _heap_push(heap, size, node, diff, seq):  # type: ignore[no-untyped-def]  # pragma: no cover
    pos = size
    while pos > 0:
        parent = (pos - 1) // 2
        if _first(diff, seq, node, heap[parent]):
            heap[pos] = heap[parent]
            pos = parent
        else:
            break
    heap[pos] = node
    return size + 1


@numba.njit(cache=True, nogil=True)
def _heap_pop(heap, size, diff, seq):  # type: ignore[no-untyped-def]  # pragma: no cover
    top = heap[0]
    size -= 1
    last = heap[size]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        right = child + 1
        if right < size and _first(diff, seq, heap[right], heap[child]):
            child = right
        if _first(diff, seq, heap[child], last):
            heap[pos] = heap[child]
            pos = child
        else:
            break
    if size > 0:
        heap[pos] = last
    return top, size


@numba.njit(cache=True, nogil=True)
def kk_assign_nb(
    order: np.ndarray, costs: np.ndarray, k: int, group: int
) -> np.ndarray:  # pragma: no cover
    """Karmarkar–Karp differencing; nodes live in a growable pool, subsets as linked lists."""
    n = costs.shape[0]
    rank = np.zeros(n, dtype=np.int64)
    if k == 1 or n == 0:
        return rank
    nxt = np.full(n, -1, dtype=np.int64)
    cap = max(16, n // k + 16) if group == 1 else (n + k - 1) // k + 1
    vals = np.zeros((cap, k), dtype=np.float64)
    head = np.full((cap, k), -1, dtype=np.int64)
    tail = np.full((cap, k), -1, dtype=np.int64)
    diff = np.zeros(cap, dtype=np.float64)
    seq = np.zeros(cap, dtype=np.int64)
    heap = np.zeros(cap, dtype=np.int64)
    free = np.zeros(cap, dtype=np.int64)
    nfree = 0
    used = 0  # pool slots ever handed out
    size = 0
    counter = 0
    stream_len = 0
    if group == 1:
        stream_len = n
    else:
        for start in range(0, n, k):
            node = used
            used += 1
            stop = min(start + k, n)
            for t in range(start, stop):
                vals[node, t - start] = costs[order[t]]
                head[node, t - start] = order[t]
                tail[node, t - start] = order[t]
            low = vals[node, k - 1]
            for j in range(k):
                vals[node, j] = vals[node, j] - low
            diff[node] = vals[node, 0] - vals[node, k - 1]
            seq[node] = counter
            counter += 1
            size = _heap_push(heap, size, node, diff, seq)
    pos = 0
    new_vals = np.empty(k, dtype=np.float64)
    new_head = np.empty(k, dtype=np.int64)
    new_tail = np.empty(k, dtype=np.int64)
    while size + (stream_len - pos) > 1:
        # --- take A and B: -1 + item means "singleton item" (not in the pool)
        picks = np.empty(2, dtype=np.int64)
        for p in range(2):
            use_stream = False
            if pos < stream_len:
                x = costs[order[pos]]
                if size == 0 or diff[heap[0]] < x:
                    use_stream = True
            if use_stream:
                picks[p] = -1 - order[pos]
                pos += 1
            else:
                top, size = _heap_pop(heap, size, diff, seq)
                picks[p] = top
        a = picks[0]
        b = picks[1]
        # --- merge: new_j = A_j + B_{k-1-j}; subsets concatenated the same way
        for j in range(k):
            jb = k - 1 - j
            if a >= 0:
                av = vals[a, j]
                ah = head[a, j]
                at = tail[a, j]
            elif j == 0:
                av = costs[-1 - a]
                ah = -1 - a
                at = ah
            else:
                av = 0.0
                ah = -1
                at = -1
            if b >= 0:
                bv = vals[b, jb]
                bh = head[b, jb]
                bt = tail[b, jb]
            elif jb == 0:
                bv = costs[-1 - b]
                bh = -1 - b
                bt = bh
            else:
                bv = 0.0
                bh = -1
                bt = -1
            new_vals[j] = av + bv
            if ah == -1:
                new_head[j] = bh
                new_tail[j] = bt
            elif bh == -1:
                new_head[j] = ah
                new_tail[j] = at
            else:
                nxt[at] = bh
                new_head[j] = ah
                new_tail[j] = bt
        perm = np.argsort(-new_vals, kind="mergesort")
        # --- store the result in A's slot (or a fresh one), free B's
        if a >= 0:
            node = a
        elif nfree > 0:
            nfree -= 1
            node = free[nfree]
        else:
            if used == vals.shape[0]:
                grow = vals.shape[0] * 2
                vals2 = np.zeros((grow, k), dtype=np.float64)
                head2 = np.full((grow, k), -1, dtype=np.int64)
                tail2 = np.full((grow, k), -1, dtype=np.int64)
                diff2 = np.zeros(grow, dtype=np.float64)
                seq2 = np.zeros(grow, dtype=np.int64)
                heap2 = np.zeros(grow, dtype=np.int64)
                free2 = np.zeros(grow, dtype=np.int64)
                vals2[:used] = vals[:used]
                head2[:used] = head[:used]
                tail2[:used] = tail[:used]
                diff2[:used] = diff[:used]
                seq2[:used] = seq[:used]
                heap2[:size] = heap[:size]
                free2[:nfree] = free[:nfree]
                vals, head, tail, diff, seq, heap, free = (
                    vals2,
                    head2,
                    tail2,
                    diff2,
                    seq2,
                    heap2,
                    free2,
                )
            node = used
            used += 1
        if b >= 0:
            free[nfree] = b
            nfree += 1
        low = new_vals[perm[k - 1]]
        for j in range(k):
            src = perm[j]
            vals[node, j] = new_vals[src] - low
            head[node, j] = new_head[src]
            tail[node, j] = new_tail[src]
        diff[node] = vals[node, 0] - vals[node, k - 1]
        seq[node] = counter
        counter += 1
        size = _heap_push(heap, size, node, diff, seq)
    if size == 1:
        node = heap[0]
        for j in range(k):
            i = head[node, j]
            while i != -1:
                rank[i] = j
                i = nxt[i]
    return rank
