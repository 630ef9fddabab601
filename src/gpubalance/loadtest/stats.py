"""Latency and throughput figures of one run, from its per-request records.

Percentiles are numpy's linear-interpolation percentiles over successful requests only;
failed requests are counted by error kind (with one example detail each) and left out of
every latency figure. Throughput is measured over the run's span: from the first send to
the last completion (seconds), so ``throughput_rps`` is completed-ok requests per second
of that span.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gpubalance.loadtest.records import RequestRecord

__all__ = ["PERCENTILES", "Percentiles", "RunSummary", "percentiles", "summarize"]

PERCENTILES = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Percentiles, mean and max of a latency sample, seconds (NaN when the sample is empty)."""

    p50: float
    p90: float
    p95: float
    p99: float
    mean: float
    max: float
    n: int

    def get(self, name: str) -> float:
        """The figure called ``name`` (``p50``, ``p90``, ``p95``, ``p99``, ``mean``, ``max``)."""
        value = getattr(self, name, None)
        if not isinstance(value, float):
            raise KeyError(name)
        return value


def percentiles(values: Sequence[float] | np.ndarray) -> Percentiles:
    """:class:`Percentiles` of ``values`` (seconds)."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        nan = math.nan
        return Percentiles(nan, nan, nan, nan, nan, nan, 0)
    q = np.percentile(arr, PERCENTILES)
    return Percentiles(
        float(q[0]),
        float(q[1]),
        float(q[2]),
        float(q[3]),
        float(arr.mean()),
        float(arr.max()),
        int(arr.size),
    )


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Figures of one run (one rate or one concurrency level).

    ``offered_rps`` is the schedule's rate (open loop) and ``concurrency`` the closed-loop
    level (one of them is None). ``latency_s`` maps ``e2e``, ``ttft`` and ``itl`` to
    :class:`Percentiles`; ``send_lateness_s`` is the open-loop scheduler's accuracy.
    """

    label: str
    offered_rps: float | None
    concurrency: int | None
    n_requests: int
    n_ok: int
    errors: dict[str, int]
    error_examples: dict[str, str]
    span_s: float
    throughput_rps: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    gpus: int
    latency_s: dict[str, Percentiles] = field(default_factory=dict)
    send_lateness_s: Percentiles | None = None

    @property
    def n_failed(self) -> int:
        """Requests that did not get a complete answer."""
        return self.n_requests - self.n_ok

    @property
    def error_rate(self) -> float:
        """Failed over all requests (0 when there were none)."""
        return self.n_failed / self.n_requests if self.n_requests else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes None)."""

        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            return x

        d: dict[str, Any] = {
            "label": self.label,
            "offered_rps": self.offered_rps,
            "concurrency": self.concurrency,
            "n_requests": self.n_requests,
            "n_ok": self.n_ok,
            "n_failed": self.n_failed,
            "error_rate": self.error_rate,
            "errors": dict(self.errors),
            "error_examples": dict(self.error_examples),
            "span_s": self.span_s,
            "throughput_rps": self.throughput_rps,
            "throughput_rps_per_gpu": self.throughput_rps / self.gpus,
            "input_tokens_per_s": self.input_tokens_per_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.gpus,
            "gpus": self.gpus,
            "latency_s": {k: asdict(v) for k, v in self.latency_s.items()},
            "send_lateness_s": asdict(self.send_lateness_s) if self.send_lateness_s else None,
        }
        return clean(d)


def summarize(
    records: Sequence[RequestRecord],
    *,
    label: str = "",
    offered_rps: float | None = None,
    concurrency: int | None = None,
    gpus: int = 1,
) -> RunSummary:
    """Summarise one run's records (any order)."""
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    errors = Counter(r.error_kind or "other" for r in failed)
    examples: dict[str, str] = {}
    for r in failed:
        examples.setdefault(r.error_kind or "other", r.error_detail)
    if records:
        start = min(r.sent_s for r in records)
        end = max(r.end_s for r in records if math.isfinite(r.end_s))
        span = max(end - start, 1e-9)
    else:
        span = 0.0
    itl = [g for r in ok for g in r.itl_s]
    lat = {
        "e2e": percentiles([r.e2e_s for r in ok]),
        "ttft": percentiles([r.ttft_s for r in ok]),
        "itl": percentiles(itl),
    }
    lateness = percentiles([r.lateness_s for r in records]) if offered_rps is not None else None
    per_s = (lambda x: x / span) if span > 0 else (lambda x: 0.0)
    return RunSummary(
        label=label,
        offered_rps=offered_rps,
        concurrency=concurrency,
        n_requests=len(records),
        n_ok=len(ok),
        errors=dict(sorted(errors.items())),
        error_examples=examples,
        span_s=span,
        throughput_rps=per_s(len(ok)),
        input_tokens_per_s=per_s(sum(r.input_tokens for r in ok)),
        output_tokens_per_s=per_s(sum(r.output_tokens for r in ok)),
        gpus=max(1, gpus),
        latency_s=lat,
        send_lateness_s=lateness,
    )
