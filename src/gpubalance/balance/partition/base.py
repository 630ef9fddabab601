"""The partition contract: split items with known costs into ``k`` ranks.

A partitioner maps item costs (seconds, >= 0, finite) and a rank count to a
:class:`Partition`: which item goes to which rank. Placements may repeat an item when the
policy pads (the count baseline copies torch's DistributedSampler, which repeats items so
every rank gets the same count).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpubalance.balance.metrics import BalanceMetrics, balance_metrics
from gpubalance.errors import UserInputError

__all__ = ["Backend", "Partition", "Partitioner", "check_costs", "kernel_backend"]

Backend = Literal["auto", "numba", "python"]


@dataclass(frozen=True, slots=True)
class Partition:
    """Items placed on ranks.

    Attributes:
        ranks: number of ranks k.
        item_index: int64 item index of every placement (an item appears more than once
            only when the policy pads).
        rank: int64 rank of every placement, parallel to ``item_index``.
        item_costs_s: float64 cost of every item (seconds), indexed by item.
        policy: name of the policy that made it.
    """

    ranks: int
    item_index: np.ndarray
    rank: np.ndarray
    item_costs_s: np.ndarray
    policy: str

    def rank_items(self, r: int) -> np.ndarray:
        """Item indices placed on rank ``r``, in placement order."""
        return self.item_index[self.rank == r]

    def rank_costs_s(self) -> np.ndarray:
        """Total cost of each rank, seconds (float64, length k)."""
        return np.bincount(
            self.rank, weights=self.item_costs_s[self.item_index], minlength=self.ranks
        ).astype(np.float64)

    def rank_counts(self) -> np.ndarray:
        """Number of placements on each rank (int64, length k)."""
        return np.bincount(self.rank, minlength=self.ranks).astype(np.int64)

    def metrics(self) -> BalanceMetrics:
        """Balance metrics of this partition (lower bound over the distinct items)."""
        return balance_metrics(self.rank_costs_s(), self.item_costs_s)


def check_costs(costs_s: np.ndarray | list[float], k: int) -> np.ndarray:
    """Validate costs (1-D, finite, >= 0) and ``k >= 1``; return float64 costs."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise UserInputError(f"number of ranks must be an integer >= 1, got {k!r}", field="ranks")
    costs = np.asarray(costs_s, dtype=np.float64)
    if costs.ndim != 1:
        raise UserInputError("costs must be a 1-D sequence", field="costs")
    if costs.size and (not np.all(np.isfinite(costs)) or costs.min() < 0):
        bad = int(np.flatnonzero(~np.isfinite(costs) | (costs < 0))[0])
        raise UserInputError(
            f"item {bad}: cost must be finite and >= 0, got {costs[bad]!r}", field="costs"
        )
    return costs


def kernel_backend(backend: Backend) -> Literal["numba", "python"]:
    """Resolve ``auto``: numba when importable (and GPUBALANCE_NO_NUMBA is unset)."""
    if backend == "python":
        return "python"
    if backend == "auto" and os.environ.get("GPUBALANCE_NO_NUMBA"):
        return "python"
    try:
        import numba  # noqa: F401
    except ImportError:
        if backend == "numba":
            raise UserInputError("backend 'numba' requested but numba is not installed") from None
        return "python"
    return "numba"


def descending_order(costs: np.ndarray) -> np.ndarray:
    """Item indices by cost, largest first; equal costs by ascending index."""
    return np.argsort(-costs, kind="stable").astype(np.int64)


class Partitioner(ABC):
    """Base class: subclasses implement :meth:`assign` (one rank per item).

    Args:
        equal_counts: every rank gets the same number of items, within one
            (cardinality-constrained variant).
        backend: ``auto`` (numba if installed), ``numba`` or ``python`` (reference).
        refine: with ``equal_counts``, improve the result by count-preserving pairwise
            swaps (:func:`~gpubalance.balance.partition.refine.swap_refine`).
    """

    name = "base"

    def __init__(
        self, *, equal_counts: bool = False, backend: Backend = "auto", refine: bool = True
    ) -> None:
        self.equal_counts = equal_counts
        self.backend = backend
        self.refine = refine

    @abstractmethod
    def assign(self, costs_s: np.ndarray, k: int) -> np.ndarray:
        """Rank of each item (int64 array, same length as ``costs_s``)."""

    def partition(self, costs_s: np.ndarray | list[float], k: int) -> Partition:
        """Split items with costs ``costs_s`` (seconds) into ``k`` ranks."""
        costs = check_costs(costs_s, k)
        rank = self.assign(costs, int(k))
        if self.equal_counts and self.refine:
            from gpubalance.balance.partition.refine import swap_refine

            rank = swap_refine(rank, costs, int(k))
        idx = np.arange(costs.shape[0], dtype=np.int64)
        return Partition(int(k), idx, rank, costs, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(equal_counts={self.equal_counts}, backend={self.backend!r})"
