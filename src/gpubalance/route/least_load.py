"""Load-aware policies: least requests and least outstanding cost.

Both divide load by the backend's weight (its relative speed) and break ties by rotating
the starting point, so equal backends share traffic instead of the first one taking all.
These run once per request on the gateway's hot path and once per simulated arrival, so
the loops are written out flat (no per-backend method calls).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpubalance.route.base import POLICIES, RoutingPolicy
from gpubalance.route.state import BackendState, NoBackendAvailable

__all__ = ["LeastCost", "LeastRequests", "request_load"]


def request_load(b: BackendState) -> float:
    """Outstanding requests on ``b``: our own in-flight count, or what the backend reports
    (running + waiting, scraped) when that is larger because other clients share it.
    Taking the max, not the sum, avoids counting our own queued requests twice."""
    reported = b.running + b.waiting
    return float(reported if reported > b.in_flight else b.in_flight)


class _LeastLoad(RoutingPolicy):
    """Pick the eligible backend with the least load per unit weight; ties rotate."""

    by_cost: bool = False

    def __init__(self, *, seed: int = 0) -> None:
        self._rotate = 0

    def choose(self, backends: Sequence[BackendState], cost_s: float = 0.0) -> int:
        n = len(backends)
        best = -1
        best_load = float("inf")
        start = self._rotate % n if n else 0
        self._rotate = start + 1
        by_cost = self.by_cost
        for step in range(n):
            i = start + step
            if i >= n:
                i -= n
            b = backends[i]
            if not b.healthy or b.draining or b.weight <= 0:
                continue
            if by_cost:
                load = (b.in_flight_cost_s + cost_s) / b.weight
            else:
                reported = b.running + b.waiting
                load = (reported if reported > b.in_flight else b.in_flight) / b.weight
            if load < best_load:
                best, best_load = i, load
        if best < 0:
            raise NoBackendAvailable("no eligible backend (all unhealthy, draining or weight 0)")
        return best


class LeastRequests(_LeastLoad):
    """Fewest outstanding requests (see :func:`request_load`) per unit weight."""

    name = "least_requests"


class LeastCost(_LeastLoad):
    """Least outstanding predicted cost (seconds of work) per unit weight, counting the new
    request: the backend that would finish this request's share of work soonest.

    The price is whatever the owner passes as ``cost_s``. The gateway (roofline pools) and
    the simulator (by default) pass :class:`~gpubalance.cost.BatchedCost`, the request's
    marginal cost on a busy continuous-batching replica; standalone cost (batch-1 decode)
    overprices a decode token 30 to 200 times (H100, llama-3.1-8b) and piles long
    prompts onto the same replicas."""

    name = "least_cost"
    by_cost = True


POLICIES.register(LeastRequests.name, LeastRequests)
POLICIES.register(LeastCost.name, LeastCost)
