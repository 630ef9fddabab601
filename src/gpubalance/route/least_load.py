"""Load-aware policies: least requests and least outstanding cost.

Both divide load by the backend's weight (its relative speed) and break ties by rotating
the starting point, so equal backends share traffic instead of the first one taking all.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpubalance.route.base import POLICIES, RoutingPolicy
from gpubalance.route.state import BackendState, NoBackendAvailable

__all__ = ["LeastCost", "LeastRequests"]


class _LeastLoad(RoutingPolicy):
    def __init__(self, *, seed: int = 0) -> None:
        self._rotate = 0

    def _load(self, b: BackendState, cost_s: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def choose(self, backends: Sequence[BackendState], cost_s: float = 0.0) -> int:
        n = len(backends)
        best = -1
        best_load = float("inf")
        start = self._rotate % n if n else 0
        for step in range(n):
            i = (start + step) % n
            b = backends[i]
            if not b.eligible:
                continue
            load = self._load(b, cost_s)
            if load < best_load:
                best, best_load = i, load
        if best < 0:
            raise NoBackendAvailable("no eligible backend (all unhealthy, draining or weight 0)")
        self._rotate = start + 1
        return best


class LeastRequests(_LeastLoad):
    """Fewest (in-flight + backend-reported waiting) requests per unit weight."""

    name = "least_requests"

    def _load(self, b: BackendState, cost_s: float) -> float:
        return (b.in_flight + b.waiting) / b.weight


class LeastCost(_LeastLoad):
    """Least outstanding predicted cost (seconds of work) per unit weight, counting the new
    request: the backend that would finish this request's share of work soonest."""

    name = "least_cost"

    def _load(self, b: BackendState, cost_s: float) -> float:
        return (b.in_flight_cost_s + cost_s) / b.weight


POLICIES.register(LeastRequests.name, LeastRequests)
POLICIES.register(LeastCost.name, LeastCost)
