"""Serving metrics of a simulation: latency percentiles, throughput, goodput, utilisation.

Definitions (all times in seconds, measured from the request's arrival):

- queue (waiting time): start of the first iteration that worked on the request - arrival.
- TTFT: end of the iteration that emitted the first token - arrival.
- TPOT (time per output token): (finish - first token) / (output_tokens - 1), for requests
  with at least two output tokens (NaN otherwise).
- e2e: end of the iteration that emitted the last token - arrival.

Percentiles use numpy's default (linear interpolation) over completed requests; rejected
requests have no latency (NaN) and count against goodput. Nothing here prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SLA", "Goodput", "LatencyStats", "goodput", "latency_stats"]

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Summary of one latency metric in seconds over ``count`` finite samples (NaN if none)."""

    count: int
    mean_s: float
    p50_s: float
    p90_s: float
    p95_s: float
    p99_s: float
    max_s: float

    def quantile_s(self, q: float) -> float:
        """The stored percentile for ``q`` in {0.5, 0.9, 0.95, 0.99} (else ValueError)."""
        table = {0.5: self.p50_s, 0.9: self.p90_s, 0.95: self.p95_s, 0.99: self.p99_s}
        if q not in table:
            raise ValueError(f"quantile {q} not stored; use one of {sorted(table)}")
        return table[q]


def latency_stats(values_s: np.ndarray) -> LatencyStats:
    """Summary of the finite values of ``values_s`` (seconds)."""
    v = np.asarray(values_s, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        nan = math.nan
        return LatencyStats(0, nan, nan, nan, nan, nan, nan)
    p = np.percentile(v, PERCENTILES)
    return LatencyStats(
        count=int(v.size),
        mean_s=float(v.mean()),
        p50_s=float(p[0]),
        p90_s=float(p[1]),
        p95_s=float(p[2]),
        p99_s=float(p[3]),
        max_s=float(v.max()),
    )


@dataclass(frozen=True, slots=True)
class SLA:
    """Per-request latency limits in seconds (None: no limit on that metric).

    A request meets the SLA when it completed and each set limit holds for it. ``quantile``
    is the fraction of requests that must meet each limit for the deployment to pass (0.99:
    the p99 must be within the limits); the early exit of the simulator uses it.
    """

    ttft_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    quantile: float = 0.99

    def __post_init__(self) -> None:
        for name in ("ttft_s", "e2e_s", "tpot_s"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"SLA {name} must be > 0 seconds, got {v}")
        if not 0.0 < self.quantile <= 1.0:
            raise ValueError(f"SLA quantile must be in (0, 1], got {self.quantile}")

    def allowed_violations(self, n_requests: int) -> int:
        """Most requests that may miss a limit with the quantile still met:
        ``floor((1 - quantile) * n)``."""
        return math.floor((1.0 - self.quantile) * n_requests + 1e-9)


@dataclass(frozen=True, slots=True)
class Goodput:
    """Requests that met the SLA: how many, their fraction of all requests, and per second
    of the simulated span (``rate_rps``)."""

    count: int
    fraction: float
    rate_rps: float


def goodput(
    sla: SLA,
    ttft_s: np.ndarray,
    e2e_s: np.ndarray,
    tpot_s: np.ndarray,
    span_s: float,
) -> Goodput:
    """Goodput of per-request latencies (NaN = did not complete) under ``sla``.

    TPOT is checked only for requests that have one (>= 2 output tokens).
    """
    ok = np.isfinite(e2e_s)
    if sla.ttft_s is not None:
        ok &= ttft_s <= sla.ttft_s
    if sla.e2e_s is not None:
        ok &= e2e_s <= sla.e2e_s
    if sla.tpot_s is not None:
        ok &= ~(tpot_s > sla.tpot_s)  # NaN TPOT (single-token answers) passes
    n = int(ok.sum())
    total = int(e2e_s.shape[0])
    return Goodput(
        count=n,
        fraction=n / total if total else math.nan,
        rate_rps=n / span_s if span_s > 0 else math.nan,
    )
