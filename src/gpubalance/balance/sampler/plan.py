"""Rank-local epoch plans shared by the samplers (internal).

The costs are sorted once (ties in seeded random order). Each epoch, the sorted list is
cut into steps of ``global_batch`` consecutive (so alike) items starting at a random
offset, treating the list as a ring; the one step that wraps around the ring holds the
cheapest and the dearest items, which in that order are still sorted, so no step is ever
re-sorted. Full steps are visited in shuffled order and the shorter remainder step (if
any) comes last, so a DataLoader's batches line up with steps. Inside a step items are dealt
to ranks in snake order (``0..k-1, k-1..0, ...``) starting at a random rotation, so each
rank gets ``global_batch / k`` items of near-equal total cost. A rank computes only its
own positions: after the one-off sort, per-step work is O(global_batch / k) and per-epoch
work O(n / k + steps), independent of the number of ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["EpochPlan", "SortedItems", "snake_positions"]


def snake_positions(length: int, k: int, lane: int) -> np.ndarray:
    """Positions (0-based) that lane ``lane`` takes when ``length`` items are dealt in snake
    order over ``k`` lanes: rounds of k, alternately forwards and backwards."""
    rounds = length // k
    j = np.arange(rounds, dtype=np.int64)
    return j * k + np.where(j % 2 == 0, lane, k - 1 - lane)


@dataclass(frozen=True)
class SortedItems:
    """Item costs sorted once: ascending, ties in an order fixed by ``seed``."""

    costs_s: np.ndarray
    seed: int
    shuffle: bool

    @cached_property
    def order(self) -> np.ndarray:
        n = self.costs_s.shape[0]
        if self.shuffle:
            perm = np.random.default_rng([self.seed, 0x5EED]).permutation(n).astype(np.int64)
        else:
            perm = np.arange(n, dtype=np.int64)
        return perm[np.argsort(self.costs_s[perm], kind="stable")]

    def ring(self, total: int) -> np.ndarray:
        """The sorted items padded to ``total`` (cheapest repeated, still sorted), cached."""
        cache: dict[int, np.ndarray] = self.__dict__.setdefault("_rings", {})
        if total not in cache:
            n = self.order.shape[0]
            if total <= n:
                cache[total] = self.order
            else:
                q, rem = divmod(total - n, n)
                counts = np.full(n, 1 + q, dtype=np.int64)
                counts[:rem] += 1
                cache[total] = np.repeat(self.order, counts)
        return cache[total]


class EpochPlan:
    """One epoch of steps for one rank (see the module docstring)."""

    def __init__(
        self,
        items: SortedItems,
        k: int,
        rank: int,
        per_rank_batch: int,
        epoch: int,
        *,
        drop_last: bool,
    ) -> None:
        n = items.costs_s.shape[0]
        self.k = k
        self.rank = rank
        self.items = items
        g = per_rank_batch * k
        self.global_batch = g
        # padding repeats the cheapest items (they cost least), keeping the ring sorted
        self.total = (n // k) * k if drop_last else math.ceil(n / k) * k
        self.ring = items.ring(max(self.total, n))
        self.n_steps = math.ceil(self.total / g) if self.total else 0
        full = self.total // g
        if items.shuffle:
            rng = np.random.default_rng([items.seed, epoch])
            self.offset = int(rng.integers(self.ring.shape[0])) if self.ring.shape[0] else 0
            self.step_order = np.concatenate(
                [rng.permutation(full), np.arange(full, self.n_steps)]
            ).astype(np.int64)
            self.rotation = rng.integers(0, k, size=self.n_steps)
        else:
            self.offset = 0
            self.step_order = np.arange(self.n_steps)
            self.rotation = np.zeros(self.n_steps, dtype=np.int64)

    def step_length(self, chunk: int) -> int:
        """Items (all ranks) in chunk ``chunk`` of the ring."""
        return min(self.global_batch, self.total - chunk * self.global_batch)

    def per_rank_count(self, s: int) -> int:
        """Items this rank gets in the s-th step it visits."""
        return self.step_length(int(self.step_order[s])) // self.k

    def step_items(self, s: int) -> np.ndarray:
        """Item indices this rank runs in the s-th step it visits (O(items per rank))."""
        chunk = int(self.step_order[s])
        length = self.step_length(chunk)
        m = self.ring.shape[0]
        start = (self.offset + chunk * self.global_batch) % m
        lane = int((self.rank + self.rotation[s]) % self.k)
        pos = snake_positions(length, self.k, lane)
        if start + length <= m:
            return self.ring[start + pos]
        # wraps: ring[start:m] (dearest) and ring[:rest] (cheapest); cheapest first is sorted
        rest = length - (m - start)
        return np.where(
            pos < rest, self.ring[np.minimum(pos, m - 1)], self.ring[(start + pos - rest) % m]
        )
