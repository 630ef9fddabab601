"""Balance metrics: how far a split of work across ranks is from perfect.

All costs are in seconds (or any one unit: the ratios are unitless). The lower bound on
the makespan of any split of items into ``k`` ranks is ``max(total / k, largest item)``:
no rank can finish before the average share, nor before the single largest item.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["BalanceMetrics", "balance_metrics", "makespan_lower_bound"]


def makespan_lower_bound(item_costs_s: np.ndarray, k: int) -> float:
    """``max(sum / k, max item)`` in seconds; 0 for no items."""
    costs = np.asarray(item_costs_s, dtype=np.float64)
    if costs.size == 0:
        return 0.0
    return float(max(costs.sum() / k, costs.max()))


@dataclass(frozen=True, slots=True)
class BalanceMetrics:
    """Summary of per-rank costs.

    Attributes:
        ranks: number of ranks k.
        rank_costs_s: cost of each rank's work, seconds (tuple of k floats).
        makespan_s: the slowest rank's cost, seconds (what a synchronous step waits for).
        lower_bound_s: ``max(total / k, largest item)`` over the *distinct* items, seconds.
        makespan_over_lower_bound: makespan / lower bound (1.0 is optimal; >= 1 always).
        max_over_mean: makespan / mean rank cost (1.0 is perfect balance).
        cv: coefficient of variation of rank costs (population std / mean).
    """

    ranks: int
    rank_costs_s: tuple[float, ...]
    makespan_s: float
    lower_bound_s: float
    makespan_over_lower_bound: float
    max_over_mean: float
    cv: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (rank costs as a list)."""
        d = asdict(self)
        d["rank_costs_s"] = list(self.rank_costs_s)
        return d


def balance_metrics(rank_costs_s: np.ndarray, item_costs_s: np.ndarray) -> BalanceMetrics:
    """Metrics of a split whose ranks cost ``rank_costs_s``, for the items ``item_costs_s``.

    ``item_costs_s`` are the distinct items being split (padding duplicates excluded), used
    for the lower bound. Ratios are 1.0 when every cost is 0.
    """
    loads = np.asarray(rank_costs_s, dtype=np.float64)
    k = int(loads.shape[0])
    if k < 1:
        raise ValueError("need at least one rank")
    makespan = float(loads.max())
    mean = float(loads.mean())
    lb = makespan_lower_bound(item_costs_s, k)
    return BalanceMetrics(
        ranks=k,
        rank_costs_s=tuple(float(x) for x in loads),
        makespan_s=makespan,
        lower_bound_s=lb,
        makespan_over_lower_bound=makespan / lb if lb > 0 else 1.0,
        max_over_mean=makespan / mean if mean > 0 else 1.0,
        cv=float(loads.std() / mean) if mean > 0 else 0.0,
    )
