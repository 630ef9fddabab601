"""Backend state that routing policies read; the gateway and the simulator both keep it.

The owner (gateway or simulator fleet) calls :meth:`BackendState.start` when it sends a
request to a backend and :meth:`BackendState.finish` when the request ends (success or
failure), so in-flight counts and outstanding cost stay exact. Scraped signals (``waiting``,
``kv_usage``) are optional and default to zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BackendState", "NoBackendAvailable"]


class NoBackendAvailable(RuntimeError):
    """No eligible backend (all unhealthy, draining, or weight 0)."""


@dataclass(slots=True, eq=False)
class BackendState:
    """Live view of one backend (a GPU server / replica).

    Attributes:
        name: unique name in its pool.
        weight: relative capacity (> 0 takes traffic; 0 takes none). Weighted policies split
            traffic in proportion; load-aware policies divide load by it, so a backend twice
            as fast should carry weight 2.
        labels: free-form labels (gpu type, region, ...).
        healthy: False while ejected by health checks.
        draining: True when an operator drains it: no new requests, in-flight ones finish.
        in_flight: requests sent and not yet finished.
        in_flight_cost_s: sum of the predicted cost (seconds) of those requests.
        running: requests the backend itself reports as running (scraped; 0 if unknown).
        waiting: requests the backend itself reports as queued (scraped; 0 if unknown).
        kv_usage: KV-cache usage fraction 0..1 the backend reports (scraped; 0 if unknown).
    """

    name: str
    weight: float = 1.0
    labels: dict[str, str] = field(default_factory=dict)
    healthy: bool = True
    draining: bool = False
    in_flight: int = 0
    in_flight_cost_s: float = 0.0
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0

    @property
    def eligible(self) -> bool:
        """Whether new requests may be sent here."""
        return self.healthy and not self.draining and self.weight > 0

    def start(self, cost_s: float) -> None:
        """Record a request of predicted ``cost_s`` seconds sent to this backend."""
        self.in_flight += 1
        self.in_flight_cost_s += cost_s

    def finish(self, cost_s: float) -> None:
        """Record the end of a request started with :meth:`start` (same ``cost_s``)."""
        self.in_flight -= 1
        self.in_flight_cost_s -= cost_s
        if self.in_flight <= 0:  # clear float drift when idle
            self.in_flight = 0
            self.in_flight_cost_s = 0.0
