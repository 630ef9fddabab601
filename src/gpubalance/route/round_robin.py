"""Round robin: each eligible backend in turn, ignoring load and weight."""

from __future__ import annotations

from collections.abc import Sequence

from gpubalance.route.base import POLICIES, RoutingPolicy
from gpubalance.route.state import BackendState, NoBackendAvailable

__all__ = ["RoundRobin"]


class RoundRobin(RoutingPolicy):
    """Cycle through backends; ineligible ones are skipped."""

    name = "round_robin"

    def __init__(self, *, seed: int = 0) -> None:
        self._next = 0

    def choose(self, backends: Sequence[BackendState], cost_s: float = 0.0) -> int:
        n = len(backends)
        for step in range(n):
            i = (self._next + step) % n
            if backends[i].eligible:
                self._next = i + 1
                return i
        raise NoBackendAvailable("no eligible backend (all unhealthy, draining or weight 0)")


POLICIES.register(RoundRobin.name, RoundRobin)
