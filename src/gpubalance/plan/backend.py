"""What the planner asks of the performance side, as a protocol.

The planner is pure search and arithmetic; everything that depends on the model, the GPU
and the simulator sits behind :class:`PlanBackend`. :mod:`gpubalance.plan.sim_backend`
implements it with the hardware catalog, the roofline cost model and the serving simulator;
tests implement it with small hand-made stand-ins whose answers are known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gpubalance.plan.shapes import GpuOffer
from gpubalance.plan.sla import LatencySummary, Sla

__all__ = ["LatencySamples", "PlanBackend", "ReplicaFit"]


@dataclass(frozen=True, slots=True)
class ReplicaFit:
    """Whether one replica (``tp`` GPUs of type ``gpu``) holds the model.

    Attributes:
        fits: weights, KV cache for at least one longest request, and reserves fit.
        explanation: the memory arithmetic, human-readable (shown when nothing fits).
        weights_per_gpu_bytes: model weights on each GPU of the replica.
        kv_capacity_tokens: tokens of KV cache the replica can hold.
    """

    gpu: str
    tp: int
    fits: bool
    explanation: str
    weights_per_gpu_bytes: int = 0
    kv_capacity_tokens: int = 0


@dataclass(frozen=True, slots=True)
class LatencySamples:
    """Per-request latencies and utilisation of one simulated fleet (for plots).

    Attributes:
        ttft_s, e2e_s: per completed request, seconds.
        replica_busy_fraction: per replica, fraction of the simulated span spent computing.
        sample_s: times of the queue samples, seconds.
        running, waiting: sequences running / waiting over the whole fleet at each sample.
    """

    ttft_s: np.ndarray
    e2e_s: np.ndarray
    replica_busy_fraction: np.ndarray
    sample_s: np.ndarray
    running: np.ndarray
    waiting: np.ndarray


class PlanBackend(Protocol):
    """Performance answers for one model at one precision over one workload."""

    def offers(self) -> list[GpuOffer]:
        """GPU types to consider, with prices."""
        ...

    def fit(self, gpu: str, tp: int) -> ReplicaFit:
        """Memory check of one replica."""
        ...

    def capacity_rps(self, gpu: str, tp: int) -> float:
        """Upper bound on requests per second one replica can sustain on the workload
        (analytic; the simulator never does better). Used to start and prune the search."""
        ...

    def mean_tokens_per_request(self) -> float:
        """Mean input + output tokens per request of the workload."""
        ...

    def evaluate(
        self, gpu: str, tp: int, replicas: int, rate_rps: float, sla: Sla | None
    ) -> LatencySummary:
        """Simulate ``replicas`` replicas at ``rate_rps``. With ``sla`` given the simulation
        may stop early once the SLA is out of reach (``summary.stopped_early``)."""
        ...

    def samples(self, gpu: str, tp: int, replicas: int, rate_rps: float) -> LatencySamples:
        """Full per-request latencies of one fleet, for CDF plots."""
        ...
