"""Pairwise-exchange refinement for equal-count partitions.

Equal-count heuristics (LPT in rounds, balanced Karmarkar–Karp) place at most one item
per rank per round of ``k`` items, so the rank holding a very large item is also handed
one item from every later round; on heavy-tailed costs that rank ends far above the rest.
This pass repeatedly swaps one item of the heaviest rank with one lighter item of a light
rank, choosing the pair whose difference is closest to half the load gap (the swap that
lowers the heavier rank most without overshooting). Swaps keep every rank's item count
and never raise the makespan. O(iterations x (n/k) log(n/k)).
"""

from __future__ import annotations

import numpy as np

__all__ = ["swap_refine"]


def swap_refine(
    rank: np.ndarray,
    costs: np.ndarray,
    k: int,
    *,
    max_iter: int | None = None,
) -> np.ndarray:
    """Improve ``rank`` (one rank per item) by count-preserving swaps; returns a new array.

    Args:
        max_iter: swap budget (default ``50 * k + 100``).

    Each round tries partner ranks from the lightest up and makes the first improving
    swap; it stops when no rank offers one (or the budget is spent).
    """
    out = np.asarray(rank, dtype=np.int64).copy()
    if k < 2 or out.shape[0] < 2:
        return out
    loads = np.bincount(out, weights=costs, minlength=k).astype(np.float64)
    order = np.argsort(costs, kind="stable")
    members = [order[out[order] == r] for r in range(k)]  # each sorted by cost ascending
    for _ in range(max_iter if max_iter is not None else 50 * k + 100):
        hi = int(np.argmax(loads))
        done = True
        for lo in np.argsort(loads, kind="stable").tolist():
            gap = loads[hi] - loads[lo]
            if lo == hi or gap <= 0 or members[hi].size == 0 or members[lo].size == 0:
                continue
            ca = costs[members[hi]]
            cb = costs[members[lo]]
            j = np.searchsorted(cb, ca - gap / 2)
            best_score = np.inf
            best: tuple[int, int] | None = None
            for cand in (np.clip(j - 1, 0, cb.size - 1), np.clip(j, 0, cb.size - 1)):
                delta = ca - cb[cand]
                ok = (delta > 0) & (delta < gap)
                if not ok.any():
                    continue
                score = np.where(ok, np.abs(delta - gap / 2), np.inf)
                a = int(np.argmin(score))
                if score[a] < best_score:
                    best_score, best = float(score[a]), (a, int(cand[a]))
            if best is None:
                continue
            a, b = best
            ia, ib = int(members[hi][a]), int(members[lo][b])
            delta = costs[ia] - costs[ib]
            loads[hi] -= delta
            loads[lo] += delta
            out[ia], out[ib] = lo, hi
            members[hi] = _insert(np.delete(members[hi], a), ib, costs)
            members[lo] = _insert(np.delete(members[lo], b), ia, costs)
            done = False
            break
        if done:
            break
    return out


def _insert(sorted_items: np.ndarray, item: int, costs: np.ndarray) -> np.ndarray:
    pos = int(np.searchsorted(costs[sorted_items], costs[item], side="right"))
    return np.insert(sorted_items, pos, item)
