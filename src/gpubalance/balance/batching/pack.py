"""Budgeted micro-batches: bucket items by cost, then pack greedily under a constraint.

Sorting by cost before packing (bucketing) keeps each batch's items alike, so padding to
the longest wastes little. Everything here returns item indices; nothing is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpubalance.balance.batching.constraint import BatchConstraint
from gpubalance.balance.partition.base import Backend, kernel_backend

__all__ = [
    "PackingStats",
    "equalize_batch_count",
    "pack_micro_batches",
    "packing_stats",
]


def _pack_bounds(
    order: np.ndarray,
    costs: np.ndarray,
    measure: np.ndarray,
    constraint: BatchConstraint,
    backend: Backend,
) -> np.ndarray:
    max_cost, max_tok, max_items = constraint.limits()
    if kernel_backend(backend) == "numba":
        from gpubalance.balance.batching.pack_kernels_numba import pack_greedy_nb

        return np.asarray(
            pack_greedy_nb(order, costs, measure, max_cost, max_tok, max_items), dtype=np.int64
        )
    from gpubalance.balance.batching.pack_kernels import pack_greedy_py

    return pack_greedy_py(order, costs, measure, max_cost, max_tok, max_items)


def pack_micro_batches(
    item_costs_s: np.ndarray,
    constraint: BatchConstraint,
    *,
    tokens: np.ndarray | None = None,
    items: np.ndarray | None = None,
    bucket: bool = True,
    backend: Backend = "auto",
) -> list[np.ndarray]:
    """Split ``items`` (default: all) into micro-batches that each satisfy ``constraint``.

    Args:
        item_costs_s: cost of every item, seconds (indexed by item).
        tokens: length of every item in tokens (needed only for ``max_tokens``).
        items: the item indices to pack, in the order to keep when ``bucket`` is False.
        bucket: sort the items by cost (ascending, stable) first, so batches are alike.
            Packed constraints (``padding=False``) always use largest-first two-pointer
            packing instead (padding does not matter there).

    Returns:
        Item-index arrays, one per micro-batch, in packing order. Raises UserInputError
        if some item alone breaks the constraint (the budget is smaller than one item).
    """
    costs = np.asarray(item_costs_s, dtype=np.float64)
    idx = np.arange(costs.shape[0], dtype=np.int64) if items is None else np.asarray(items)
    idx = idx.astype(np.int64, copy=False)
    if constraint.max_tokens is not None and tokens is None:
        raise ValueError("constraint has max_tokens but no token lengths were given")
    tok = None if tokens is None else np.asarray(tokens, dtype=np.float64)
    constraint.check_items_fit(costs[idx], None if tok is None else tok[idx])
    measure = np.zeros_like(costs) if tok is None else constraint.token_measure(tok)
    if not constraint.padding:
        from gpubalance.balance.batching.pack_kernels import pack_two_pointer_py

        desc = idx[np.argsort(-costs[idx], kind="stable")]
        max_cost, max_tok, max_items = constraint.limits()
        groups = pack_two_pointer_py(desc, costs, measure, max_cost, max_tok, max_items)
        return [np.asarray(g, dtype=np.int64) for g in groups]
    if bucket:
        idx = idx[np.argsort(costs[idx], kind="stable")]
    bounds = _pack_bounds(idx, costs, measure, constraint, backend)
    return [idx[bounds[j] : bounds[j + 1]] for j in range(bounds.shape[0] - 1)]


def equalize_batch_count(
    batches: list[np.ndarray], target: int, item_costs_s: np.ndarray
) -> list[np.ndarray]:
    """Split batches until there are ``target`` of them (never merges; limits still hold).

    The batch with the largest cost (padded: items x max; ties: the earlier one) that has
    at least two items is split in two halves, in place, until the count is reached.
    Raises ValueError if ``target`` exceeds the number of items.
    """
    out = [np.asarray(b) for b in batches]
    total = sum(int(b.shape[0]) for b in out)
    if target > total:
        raise ValueError(f"cannot make {target} non-empty batches from {total} items")
    costs = np.asarray(item_costs_s, dtype=np.float64)
    while len(out) < target:
        best = -1
        best_cost = -1.0
        for j, b in enumerate(out):
            if b.shape[0] >= 2:
                padded = float(b.shape[0] * costs[b].max())
                if padded > best_cost:
                    best, best_cost = j, padded
        b = out[best]
        half = b.shape[0] // 2
        out[best : best + 1] = [b[:half], b[half:]]
    return out


@dataclass(frozen=True, slots=True)
class PackingStats:
    """How well micro-batches use their budget.

    Attributes:
        batches: number of micro-batches.
        mean_items: mean items per batch.
        fill: padded cost of all batches / (batches x budget): how full the budget is.
        useful: unpadded item cost / (batches x budget): the packing efficiency, i.e. the
            share of the budget spent on real work (padding and empty room both count
            against it).
        padding_waste: 1 - unpadded / padded cost.
    """

    batches: int
    mean_items: float
    fill: float
    useful: float
    padding_waste: float


def packing_stats(
    batches: list[np.ndarray], item_costs_s: np.ndarray, budget_s: float, *, padding: bool = True
) -> PackingStats:
    """Statistics of ``batches`` against a cost budget ``budget_s`` (seconds).

    ``padding``: batches run padded (cost items x max) or packed (cost = sum).
    """
    costs = np.asarray(item_costs_s, dtype=np.float64)
    nb = len(batches)
    if nb == 0:
        return PackingStats(0, 0.0, 0.0, 0.0, 0.0)
    if padding:
        padded = sum(float(b.shape[0] * costs[b].max()) for b in batches if b.size)
    else:
        padded = sum(float(costs[b].sum()) for b in batches)
    useful = sum(float(costs[b].sum()) for b in batches)
    items = sum(int(b.shape[0]) for b in batches)
    return PackingStats(
        batches=nb,
        mean_items=items / nb,
        fill=padded / (nb * budget_s),
        useful=useful / (nb * budget_s),
        padding_waste=1.0 - useful / padded if padded > 0 else 0.0,
    )
