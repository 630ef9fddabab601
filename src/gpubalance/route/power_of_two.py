"""Power of two choices: sample two eligible backends at random, take the less loaded."""

from __future__ import annotations

import random
from collections.abc import Sequence

from gpubalance.route.base import POLICIES, RoutingPolicy
from gpubalance.route.least_load import request_load
from gpubalance.route.state import BackendState

__all__ = ["PowerOfTwo"]


class PowerOfTwo(RoutingPolicy):
    """Two random eligible backends (seeded); the one with fewer outstanding requests per
    unit weight (:func:`~gpubalance.route.least_load.request_load`) wins (ties: outstanding
    cost, then the first drawn)."""

    name = "power_of_two"

    def __init__(self, *, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def choose(self, backends: Sequence[BackendState], cost_s: float = 0.0) -> int:
        idx = self._eligible(backends)
        if len(idx) == 1:
            return idx[0]
        a, b = self._rng.sample(idx, 2)
        ba, bb = backends[a], backends[b]
        ka = (request_load(ba) / ba.weight, ba.in_flight_cost_s / ba.weight)
        kb = (request_load(bb) / bb.weight, bb.in_flight_cost_s / bb.weight)
        return b if kb < ka else a


POLICIES.register(PowerOfTwo.name, PowerOfTwo)
