"""Latency objectives (SLA) and the latency summary the planner checks them against.

All times are seconds. An SLA bound left as ``None`` is not checked. TTFT is the time from
arrival to the first output token; end-to-end (e2e) is arrival to the last token.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_SLA", "LatencySummary", "Sla"]


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latency percentiles (seconds) and throughput of one simulated fleet at one load.

    Attributes:
        ttft_p95_s / ttft_p99_s: time to first token, 95th / 99th percentile.
        e2e_p95_s / e2e_p99_s: end-to-end latency, 95th / 99th percentile.
        e2e_mean_s: mean end-to-end latency (for Little's law: in flight = rate x mean).
        tpot_p99_s: time per output token, 99th percentile (0 when unknown).
        throughput_rps: completed requests per second of simulated time.
        gpu_busy_fraction: mean fraction of time the replicas were busy (0..1).
        requests: requests simulated (completed or not).
        completed: requests that completed.
        stopped_early: the simulation stopped once the SLA was certain to be missed (its
            percentiles then cover only part of the workload).
    """

    ttft_p95_s: float
    ttft_p99_s: float
    e2e_p95_s: float
    e2e_p99_s: float
    e2e_mean_s: float = 0.0
    tpot_p99_s: float = 0.0
    throughput_rps: float = 0.0
    gpu_busy_fraction: float = 0.0
    requests: int = 0
    completed: int = 0
    stopped_early: bool = False


class Sla(BaseModel):
    """Latency objectives; ``None`` leaves a bound unchecked. Seconds throughout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_p99_s: float | None = Field(
        default=2.0, gt=0, description="99th percentile time to first token must be <= this."
    )
    e2e_p99_s: float | None = Field(
        default=20.0, gt=0, description="99th percentile end-to-end latency must be <= this."
    )
    ttft_p95_s: float | None = Field(
        default=None, gt=0, description="95th percentile time to first token must be <= this."
    )
    e2e_p95_s: float | None = Field(
        default=None, gt=0, description="95th percentile end-to-end latency must be <= this."
    )

    def bounds(self) -> list[tuple[str, float]]:
        """(metric name, bound in seconds) of every bound that is set."""
        out = []
        for name in ("ttft_p95_s", "ttft_p99_s", "e2e_p95_s", "e2e_p99_s"):
            value = getattr(self, name)
            if value is not None:
                out.append((name, float(value)))
        return out

    def violations(self, summary: LatencySummary) -> list[str]:
        """Human-readable list of the bounds ``summary`` breaks (empty when it meets all).

        A simulation that stopped early (SLA already out of reach) counts as a violation.
        """
        out = [
            f"{name} {getattr(summary, name):.3g} s > {bound:.3g} s"
            for name, bound in self.bounds()
            if not getattr(summary, name) <= bound
        ]
        if summary.stopped_early and not out:
            out.append(f"stopped early after {summary.completed}/{summary.requests} requests")
        return out

    def met(self, summary: LatencySummary) -> bool:
        """Whether ``summary`` meets every bound."""
        return not self.violations(summary)

    def describe(self) -> str:
        """E.g. ``p99 TTFT <= 2 s, p99 e2e <= 20 s``."""
        labels = {
            "ttft_p95_s": "p95 TTFT",
            "ttft_p99_s": "p99 TTFT",
            "e2e_p95_s": "p95 e2e",
            "e2e_p99_s": "p99 e2e",
        }
        return ", ".join(f"{labels[n]} <= {b:g} s" for n, b in self.bounds()) or "none"


#: The default SLA of ``gpubalance plan``: p99 TTFT <= 2 s, p99 end-to-end <= 20 s.
DEFAULT_SLA = Sla()
