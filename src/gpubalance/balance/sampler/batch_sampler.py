"""``CostBalancedBatchSampler``: budgeted micro-batches, the same count on every rank.

Items sorted by cost are packed into micro-batches under a :class:`BatchConstraint`
(padding and the quadratic term counted); the count is raised to a multiple of the world
size by splitting the largest batches (or, with fewer items than ranks need, by repeating
batches); ordered by batch cost, ``k`` consecutive (so alike) micro-batches form one
step: each rank runs one of them, so step costs are balanced and every rank yields the
same number of batches.
Packing happens once; each epoch shuffles the step order and which rank takes which
batch of a step (seeded, identical on every rank), so per-step work is O(1) and per-epoch
work O(steps), independent of the number of ranks. Use it as a DataLoader
``batch_sampler``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cached_property

import numpy as np

from gpubalance.balance.batching.constraint import BatchConstraint
from gpubalance.balance.batching.pack import equalize_batch_count, pack_micro_batches
from gpubalance.balance.partition.base import check_costs
from gpubalance.balance.sampler.distributed_sampler import resolve_world
from gpubalance.balance.sampler.resume import ResumableSampler
from gpubalance.errors import UserInputError

__all__ = ["CostBalancedBatchSampler"]


class CostBalancedBatchSampler(ResumableSampler):
    """Yields lists of item indices (micro-batches) for this rank.

    Args:
        costs_s: cost of every item, seconds.
        constraint: limits of one micro-batch.
        tokens: item lengths in tokens (needed when the constraint has ``max_tokens``).
        num_replicas, rank: world size and this rank (default: from torch.distributed).
        shuffle: shuffle step order and rank rotation each epoch (seeded).
        seed: the seed; must be the same on every rank.
    """

    def __init__(
        self,
        costs_s: np.ndarray | list[float],
        constraint: BatchConstraint,
        *,
        tokens: np.ndarray | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.costs_s = check_costs(costs_s, self.num_replicas)
        if self.costs_s.shape[0] == 0:
            raise UserInputError("no items to sample", field="costs_s")
        self.constraint = constraint
        self.tokens = None if tokens is None else np.asarray(tokens)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.epoch = 0
        self._yielded = 0
        self._resume_at = 0

    @cached_property
    def global_batches(self) -> list[np.ndarray]:
        """All micro-batches (a multiple of the world size), in packing order; cached."""
        k = self.num_replicas
        n = self.costs_s.shape[0]
        if self.shuffle:
            perm = np.random.default_rng([self.seed, 0x5EED]).permutation(n).astype(np.int64)
        else:
            perm = np.arange(n, dtype=np.int64)
        batches = pack_micro_batches(self.costs_s, self.constraint, tokens=self.tokens, items=perm)
        target = math.ceil(len(batches) / k) * k
        if target <= n:
            batches = equalize_batch_count(batches, target, self.costs_s)
        else:
            batches = equalize_batch_count(batches, n, self.costs_s)  # one item each
            batches = [batches[j % n] for j in range(target)]
        # steps take k consecutive batches: order by batch cost so each step holds alike ones
        cost = np.array([self.constraint.batch_cost_s(self.costs_s[b]) for b in batches])
        return [batches[j] for j in np.argsort(cost, kind="stable")]

    def __len__(self) -> int:
        return len(self.global_batches) // self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use the order of ``epoch`` (call before each epoch, on every rank)."""
        self.epoch = int(epoch)

    def _epoch_order(self) -> tuple[np.ndarray, np.ndarray]:
        steps = len(self)
        if not self.shuffle:
            return np.arange(steps), np.zeros(steps, dtype=np.int64)
        rng = np.random.default_rng([self.seed, self.epoch])
        return rng.permutation(steps), rng.integers(0, self.num_replicas, size=steps)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.global_batches
        k = self.num_replicas
        order, rotation = self._epoch_order()
        start = self._resume_at
        self._resume_at = 0
        self._yielded = start
        for s in range(start, order.shape[0]):
            lane = int((self.rank + rotation[s]) % k)
            self._yielded += 1
            yield batches[int(order[s]) * k + lane].tolist()
