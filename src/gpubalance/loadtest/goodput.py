"""Goodput search: the highest offered rate whose short trial still meets an SLA.

The search brackets then bisects: starting at ``start_rps`` it doubles the rate while
trials pass (halves it while they fail) until one rate passes and the next fails, then
bisects between them until the bracket is narrower than ``rel_tol`` of its upper end or the
trial budget is spent. Trials are run by a callable (rate in req/s -> :class:`RunSummary`),
so the search itself needs no network and is tested with a known threshold. Assumes
latency grows with load (a rate that passes once is taken as passing).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from gpubalance.errors import UserInputError
from gpubalance.loadtest.stats import RunSummary

__all__ = ["GoodputResult", "Sla", "SlaTarget", "parse_sla", "search_goodput"]

_SLA_RE = re.compile(
    r"^\s*(e2e|ttft|itl)\s*:\s*(p50|p90|p95|p99|mean|max)\s*<=\s*([0-9.eE+-]+)\s*(ms|s)?\s*$"
)


class SlaTarget(BaseModel):
    """One latency bound: ``metric`` at ``stat`` must be <= ``max_s`` seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(description="e2e, ttft or itl.")
    stat: str = Field(description="p50, p90, p95, p99, mean or max.")
    max_s: float = Field(gt=0, description="Upper bound, seconds.")

    def __str__(self) -> str:
        return f"{self.metric}:{self.stat}<={self.max_s:g}s"


class Sla(BaseModel):
    """Latency bounds plus a cap on the failed-request fraction."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: tuple[SlaTarget, ...] = Field(description="All must hold.")
    max_error_rate: float = Field(
        default=0.01, ge=0, le=1, description="Largest allowed failed fraction of requests."
    )

    def violations(self, summary: RunSummary) -> list[str]:
        """Human-readable reasons ``summary`` misses the SLA (empty list: it meets it)."""
        out = []
        if summary.n_ok == 0:
            return ["no successful requests"]
        if summary.error_rate > self.max_error_rate:
            out.append(f"error rate {summary.error_rate:.1%} > {self.max_error_rate:.1%}")
        for t in self.targets:
            value = summary.latency_s[t.metric].get(t.stat)
            if not math.isfinite(value) or value > t.max_s:
                out.append(f"{t.metric} {t.stat} {value:.4g}s > {t.max_s:g}s")
        return out


def parse_sla(texts: list[str], max_error_rate: float = 0.01) -> Sla:
    """Parse bounds like ``e2e:p95<=0.5`` or ``ttft:p99<=200ms`` (seconds by default)."""
    targets = []
    for text in texts:
        m = _SLA_RE.match(text)
        if not m:
            raise UserInputError(
                f"bad SLA {text!r}; expected METRIC:STAT<=VALUE[ms|s], e.g. e2e:p95<=0.5",
                field="sla",
            )
        value = float(m.group(3)) * (1e-3 if m.group(4) == "ms" else 1.0)
        targets.append(SlaTarget(metric=m.group(1), stat=m.group(2), max_s=value))
    if not targets:
        raise UserInputError("goodput search needs at least one --sla bound", field="sla")
    return Sla(targets=tuple(targets), max_error_rate=max_error_rate)


@dataclass(slots=True)
class GoodputResult:
    """Outcome of a search: the best passing rate (None if even the lowest failed), the
    first failing rate above it (None if none failed), and every trial in order."""

    best_rps: float | None
    first_fail_rps: float | None
    trials: list[tuple[float, RunSummary, list[str]]] = field(default_factory=list)


def search_goodput(
    trial: Callable[[float], RunSummary],
    sla: Sla,
    *,
    start_rps: float,
    rel_tol: float = 0.05,
    max_trials: int = 12,
    min_rps: float = 1e-3,
    on_trial: Callable[[float, RunSummary, list[str]], None] | None = None,
) -> GoodputResult:
    """Find the highest rate meeting ``sla`` (see module doc). ``trial(rate)`` runs one."""
    if not start_rps > 0:
        raise UserInputError(f"start rate must be > 0 req/s, got {start_rps}")
    result = GoodputResult(None, None)

    def run(rate: float) -> bool:
        summary = trial(rate)
        why = sla.violations(summary)
        result.trials.append((rate, summary, why))
        if on_trial is not None:
            on_trial(rate, summary, why)
        return not why

    lo: float | None = None
    hi: float | None = None
    rate = start_rps
    while len(result.trials) < max_trials:
        if run(rate):
            lo = rate
            if hi is not None:
                break
            rate *= 2.0
        else:
            hi = rate
            if lo is not None:
                break
            rate /= 2.0
            if rate < min_rps:
                break
    while lo is not None and hi is not None and len(result.trials) < max_trials:
        if hi - lo <= rel_tol * hi:
            break
        mid = 0.5 * (lo + hi)
        if run(mid):
            lo = mid
        else:
            hi = mid
    result.best_rps, result.first_fail_rps = lo, hi
    return result
