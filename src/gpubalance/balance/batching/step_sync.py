"""Step-synchronous assignment for data-parallel loops.

In data parallelism every rank runs one step, then all wait at the gradient all-reduce:
the step takes as long as its slowest rank. A *step plan* says, for every step, which
items (in which micro-batches) each rank runs. Two plans are built here:

* :func:`count_step_plan` - the baseline: torch's DistributedSampler (shuffled, padded,
  ``i % k``) with a DataLoader of ``global_batch / k`` items per rank.
* :func:`balanced_step_plan` - cost-aware: items sorted by cost (random tie order from
  the seed) are cut into steps of ``global_batch`` alike items (bucketing), the step order
  is shuffled, and each step is split across ranks by a partition policy with equal
  counts, so per-step rank costs are close. With a :class:`BatchConstraint`, each rank's
  share of a step is packed into micro-batches and all ranks get the same number of
  micro-batches in that step (the DDP loop cannot hang on a missing batch).

Both pad like DistributedSampler (repeating items) so every rank holds ``ceil(n / k)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpubalance.balance.batching.constraint import BatchConstraint
from gpubalance.balance.batching.pack import equalize_batch_count, pack_micro_batches
from gpubalance.balance.partition.base import Backend, check_costs
from gpubalance.balance.partition.registry import get_partitioner
from gpubalance.errors import UserInputError

__all__ = [
    "StepPlan",
    "balanced_step_order",
    "balanced_step_plan",
    "count_step_plan",
    "split_step",
]


@dataclass(frozen=True, slots=True)
class StepPlan:
    """Per-step, per-rank micro-batches.

    ``steps[s][r]`` is the list of micro-batches (int64 item-index arrays) rank ``r`` runs
    in step ``s``; every rank has the same number of micro-batches in a step.
    """

    ranks: int
    steps: list[list[list[np.ndarray]]]
    item_costs_s: np.ndarray
    policy: str

    def step_rank_costs_s(self) -> np.ndarray:
        """(steps, ranks) float64: unpadded cost of each rank's work in each step, seconds."""
        out = np.zeros((len(self.steps), self.ranks), dtype=np.float64)
        for s, step in enumerate(self.steps):
            for r, batches in enumerate(step):
                out[s, r] = sum(float(self.item_costs_s[b].sum()) for b in batches)
        return out

    def step_max_over_mean(self) -> np.ndarray:
        """Per step: slowest rank cost / mean rank cost (1.0 when a step costs nothing)."""
        c = self.step_rank_costs_s()
        mean = c.mean(axis=1)
        mx = c.max(axis=1)
        return np.where(mean > 0, mx / np.where(mean > 0, mean, 1.0), 1.0)

    def mean_step_max_over_mean(self) -> float:
        """Mean over steps of the per-step max / mean rank cost."""
        r = self.step_max_over_mean()
        return float(r.mean()) if r.size else 1.0

    def step_time_over_ideal(self) -> float:
        """Sum over steps of the slowest rank / sum of mean rank cost (epoch-time ratio)."""
        c = self.step_rank_costs_s()
        mean = float(c.mean(axis=1).sum())
        return float(c.max(axis=1).sum()) / mean if mean > 0 else 1.0

    def rank_items(self, r: int) -> np.ndarray:
        """All item indices rank ``r`` runs, in order."""
        parts = [b for step in self.steps for b in step[r]]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def microbatch_counts(self) -> np.ndarray:
        """(steps, ranks) int: micro-batches per rank per step (equal across a row)."""
        return np.array([[len(b) for b in step] for step in self.steps], dtype=np.int64)


def _check(costs_s: np.ndarray, k: int, global_batch: int) -> np.ndarray:
    costs = check_costs(costs_s, k)
    if costs.shape[0] == 0:
        raise UserInputError("no items to plan", field="items")
    if isinstance(global_batch, bool) or global_batch < 1 or global_batch % k:
        raise UserInputError(
            f"global batch must be a positive multiple of the ranks ({k}), got {global_batch}",
            field="global-batch",
        )
    return costs


def _padded_permutation(n: int, k: int, rng: np.random.Generator | None) -> np.ndarray:
    """DistributedSampler's index list: permuted (or not), padded to a multiple of k."""
    idx = rng.permutation(n).astype(np.int64) if rng is not None else np.arange(n, dtype=np.int64)
    total = math.ceil(n / k) * k
    reps = math.ceil(total / n)
    return np.tile(idx, reps)[:total]


def _pack_shares(
    shares: list[np.ndarray],
    costs: np.ndarray,
    constraint: BatchConstraint | None,
    tokens: np.ndarray | None,
    backend: Backend,
) -> list[list[np.ndarray]]:
    """Each rank's share as micro-batches, the same number on every rank."""
    if constraint is None:
        return [[s] for s in shares]
    packed = [
        pack_micro_batches(costs, constraint, tokens=tokens, items=s, backend=backend)
        for s in shares
    ]
    target = max(len(p) for p in packed)
    return [equalize_batch_count(p, target, costs) for p in packed]


def count_step_plan(
    costs_s: np.ndarray,
    k: int,
    global_batch: int,
    *,
    seed: int | None = 0,
    constraint: BatchConstraint | None = None,
    tokens: np.ndarray | None = None,
    backend: Backend = "auto",
) -> StepPlan:
    """DistributedSampler + DataLoader(batch_size=global_batch // k); ``seed=None``: no shuffle.

    With a constraint, each rank's step share is packed into micro-batches exactly as in
    :func:`balanced_step_plan`, so the two differ only in which items each rank gets.
    """
    costs = _check(costs_s, k, global_batch)
    if constraint is not None:
        constraint.check_items_fit(costs, tokens)
    rng = None if seed is None else np.random.default_rng(seed)
    idx = _padded_permutation(costs.shape[0], k, rng)
    per_rank = [idx[r::k] for r in range(k)]
    b = global_batch // k
    n_steps = math.ceil(per_rank[0].shape[0] / b)
    steps = [
        _pack_shares(
            [per_rank[r][s * b : (s + 1) * b] for r in range(k)], costs, constraint, tokens, backend
        )
        for s in range(n_steps)
    ]
    return StepPlan(k, steps, costs, "count")


def balanced_step_order(
    costs_s: np.ndarray, k: int, global_batch: int, *, seed: int = 0
) -> list[np.ndarray]:
    """The items of every step (before splitting across ranks), in shuffled step order.

    Items (padded to a multiple of ``k``) are sorted by cost with ties in random order,
    cut into chunks of ``global_batch`` (the last one shorter, still a multiple of ``k``),
    and the chunks are shuffled. O(n log n), independent of ``k``.
    """
    costs = _check(costs_s, k, global_batch)
    rng = np.random.default_rng(seed)
    idx = _padded_permutation(costs.shape[0], k, rng)
    idx = idx[np.argsort(costs[idx], kind="stable")]
    chunks = [idx[s : s + global_batch] for s in range(0, idx.shape[0], global_batch)]
    return [chunks[j] for j in rng.permutation(len(chunks))]


def split_step(
    step_items: np.ndarray,
    costs: np.ndarray,
    k: int,
    *,
    policy: str = "kk",
    constraint: BatchConstraint | None = None,
    tokens: np.ndarray | None = None,
    backend: Backend = "auto",
) -> list[list[np.ndarray]]:
    """Split one step's items across ``k`` ranks (equal counts) into micro-batches.

    Returns ``out[r]`` = micro-batches of rank ``r``; without a constraint each rank gets
    one micro-batch. With one, every rank gets as many micro-batches as the rank that
    needs the most (others split their largest batches).
    """
    part = get_partitioner(policy, equal_counts=True, backend=backend).partition(
        costs[step_items], k
    )
    shares = [step_items[part.rank_items(r)] for r in range(k)]
    return _pack_shares(shares, costs, constraint, tokens, backend)


def balanced_step_plan(
    costs_s: np.ndarray,
    k: int,
    global_batch: int,
    *,
    policy: str = "kk",
    seed: int = 0,
    constraint: BatchConstraint | None = None,
    tokens: np.ndarray | None = None,
    backend: Backend = "auto",
) -> StepPlan:
    """Cost-bucketed steps split across ranks by ``policy`` (see the module docstring)."""
    costs = _check(costs_s, k, global_batch)
    if constraint is not None:
        constraint.check_items_fit(costs, tokens)
    steps = [
        split_step(
            chunk,
            costs,
            k,
            policy=policy,
            constraint=constraint,
            tokens=tokens,
            backend=backend,
        )
        for chunk in balanced_step_order(costs, k, global_batch, seed=seed)
    ]
    return StepPlan(k, steps, costs, policy)
