"""Admission caps for a pool: how much work it may hold before new requests get "busy".

Pure bookkeeping (layer 2), shared by the gateway (real HTTP 429 + Retry-After) and usable
by the simulator. A pool holds a request from admission until it finishes (success or
failure); the caps bound both the number of such outstanding requests and their summed
predicted cost in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Admission", "AdmissionCaps"]


@dataclass(frozen=True, slots=True)
class AdmissionCaps:
    """Limits on what one pool may hold outstanding (None = unlimited).

    Attributes:
        max_queued: most requests admitted to the pool and not yet finished.
        max_in_flight_cost_s: most summed predicted cost (seconds of GPU work) of those.
    """

    max_queued: int | None = None
    max_in_flight_cost_s: float | None = None


class Admission:
    """Counts outstanding requests and cost of one pool against :class:`AdmissionCaps`.

    ``capacity`` is the pool's parallel service capacity (e.g. summed backend weights): it
    converts excess outstanding work (seconds) into a Retry-After hint.
    """

    __slots__ = ("capacity", "caps", "in_flight_cost_s", "queued")

    def __init__(self, caps: AdmissionCaps, capacity: float = 1.0) -> None:
        self.caps = caps
        self.capacity = max(capacity, 1e-9)
        self.queued = 0
        self.in_flight_cost_s = 0.0

    def try_admit(self, cost_s: float) -> float | None:
        """Admit a request of predicted ``cost_s`` seconds: None when admitted (counted),
        else the suggested wait in seconds before retrying (>= 1, whole seconds)."""
        caps = self.caps
        over_s = 0.0
        if caps.max_queued is not None and self.queued >= caps.max_queued:
            mean_s = self.in_flight_cost_s / self.queued if self.queued else cost_s
            over_s = (self.queued - caps.max_queued + 1) * mean_s / self.capacity
        elif (
            caps.max_in_flight_cost_s is not None
            and self.queued > 0
            and self.in_flight_cost_s + cost_s > caps.max_in_flight_cost_s
        ):
            over_s = (self.in_flight_cost_s + cost_s - caps.max_in_flight_cost_s) / self.capacity
        else:
            self.queued += 1
            self.in_flight_cost_s += cost_s
            return None
        return float(max(1, math.ceil(over_s)))

    def release(self, cost_s: float) -> None:
        """Forget a request admitted with :meth:`try_admit` (same ``cost_s``)."""
        self.queued -= 1
        self.in_flight_cost_s -= cost_s
        if self.queued <= 0:
            self.queued = 0
            self.in_flight_cost_s = 0.0
