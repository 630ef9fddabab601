"""Weighted (canary) split: smooth weighted round robin, deterministic.

Over any window of W = sum of weights requests, each backend gets exactly its weight's
share (nginx's smooth weighted round robin), spread out rather than in runs. Used for
canary weights across hardware types inside a pool.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpubalance.route.base import POLICIES, RoutingPolicy
from gpubalance.route.state import BackendState

__all__ = ["Weighted"]


class Weighted(RoutingPolicy):
    """Smooth weighted round robin over eligible backends (state keyed by backend name)."""

    name = "weighted"

    def __init__(self, *, seed: int = 0) -> None:
        self._current: dict[str, float] = {}

    def choose(self, backends: Sequence[BackendState], cost_s: float = 0.0) -> int:
        idx = self._eligible(backends)
        total = 0.0
        best = idx[0]
        best_cur = float("-inf")
        cur = self._current
        for i in idx:
            b = backends[i]
            c = cur.get(b.name, 0.0) + b.weight
            cur[b.name] = c
            total += b.weight
            if c > best_cur:
                best, best_cur = i, c
        cur[backends[best].name] = best_cur - total
        return best


POLICIES.register(Weighted.name, Weighted)
