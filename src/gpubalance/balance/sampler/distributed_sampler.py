"""``CostBalancedDistributedSampler``: a drop-in for torch's DistributedSampler that
balances cost per step instead of item count.

Same constructor shape (``dataset, num_replicas, rank, shuffle, seed, drop_last``) plus
``costs_s`` (one cost per item, seconds, e.g. from a cost model) and ``batch_size`` (the
per-rank DataLoader batch size, which defines a step). Every rank yields the same number
of indices (``ceil(n / k)``, or ``floor`` with ``drop_last``), so a DDP loop never waits on
a rank that ran out; within each step of ``batch_size`` indices the ranks' total costs are
nearly equal (steps hold alike items; see :mod:`gpubalance.balance.sampler.plan`).
Deterministic from ``seed`` and the epoch; ``state_dict``/``load_state_dict`` resume
exactly mid-epoch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized

import numpy as np

from gpubalance.balance.partition.base import check_costs
from gpubalance.balance.sampler.plan import EpochPlan, SortedItems
from gpubalance.balance.sampler.resume import ResumableSampler
from gpubalance.errors import UserInputError

__all__ = ["CostBalancedDistributedSampler", "resolve_world"]


def resolve_world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """Fill missing ``num_replicas``/``rank`` from torch.distributed (must be initialised)."""
    if num_replicas is None or rank is None:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "num_replicas and rank are required when torch.distributed is not initialised"
            )
        num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
        rank = dist.get_rank() if rank is None else rank
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise UserInputError(
            f"invalid rank {rank} for num_replicas {num_replicas}", field="num_replicas"
        )
    return int(num_replicas), int(rank)


class CostBalancedDistributedSampler(ResumableSampler):
    """Per-rank item indices, cost-balanced per step (see the module docstring).

    Args:
        dataset: optional sized dataset (only its length is checked against ``costs_s``).
        costs_s: cost of every item, seconds (>= 0).
        num_replicas, rank: world size and this rank (default: from torch.distributed).
        shuffle: randomise step order, step boundaries and tie order (seeded).
        seed: the seed; must be the same on every rank.
        drop_last: drop items so that all ranks have ``floor(n / k)`` instead of padding
            to ``ceil(n / k)`` by repeating (the cheapest) items.
        batch_size: per-rank batch size of the DataLoader using this sampler.
    """

    def __init__(
        self,
        dataset: Sized | None = None,
        *,
        costs_s: np.ndarray | list[float],
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        batch_size: int = 1,
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        costs = check_costs(costs_s, self.num_replicas)
        if dataset is not None and len(dataset) != costs.shape[0]:
            raise UserInputError(
                f"dataset has {len(dataset)} items but {costs.shape[0]} costs", field="costs_s"
            )
        if batch_size < 1:
            raise UserInputError(f"batch_size must be >= 1, got {batch_size}", field="batch_size")
        self.costs_s = costs
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.batch_size = int(batch_size)
        self.epoch = 0
        self._yielded = 0  # indices handed out in the current epoch
        self._resume_at = 0
        self._items = SortedItems(costs, self.seed, shuffle)
        n = costs.shape[0]
        k = self.num_replicas
        self.num_samples = n // k if drop_last else math.ceil(n / k)
        self.total_size = self.num_samples * k

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use the plan of ``epoch`` (call before each epoch, on every rank)."""
        self.epoch = int(epoch)

    def plan(self) -> EpochPlan:
        """This rank's plan for the current epoch."""
        return EpochPlan(
            self._items,
            self.num_replicas,
            self.rank,
            self.batch_size,
            self.epoch,
            drop_last=self.drop_last,
        )

    def __iter__(self) -> Iterator[int]:
        plan = self.plan()
        skip = self._resume_at
        self._resume_at = 0
        self._yielded = 0
        for s in range(plan.n_steps):
            count = plan.per_rank_count(s)
            if skip >= count:  # resume: skip whole steps without computing them
                skip -= count
                self._yielded += count
                continue
            items = plan.step_items(s)[skip:]
            skip = 0
            for i in items.tolist():
                self._yielded += 1
                yield i
