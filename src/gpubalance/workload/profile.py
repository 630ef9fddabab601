"""Workload profiles: a few summary figures that stand for a trace.

A profile holds percentiles of input and output tokens, a lognormal fit of each, their rank
correlation, the mean arrival rate and the burstiness (coefficient of variation of
inter-arrival times). :mod:`gpubalance.workload.generators` turns a profile back into a
seeded synthetic workload; the package ships one derived from a public trace as its
embedded default (see ``data/default_profile.yaml``, which cites its source).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator
from scipy import stats

from gpubalance.config import load_model
from gpubalance.errors import UserInputError
from gpubalance.workload.request import Request, to_arrays

__all__ = [
    "PERCENTILE_POINTS",
    "LengthDistribution",
    "WorkloadProfile",
    "default_profile",
    "profile_from_requests",
]

#: Percentiles stored for each length distribution (0 and 100 are min and max).
PERCENTILE_POINTS: tuple[float, ...] = (0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9, 100)


class LengthDistribution(BaseModel):
    """Distribution of a token count, as percentiles plus a lognormal fit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    percentiles: dict[float, float] = Field(
        description="Percentile (0-100) -> token count; must include 0 and 100 (min and max)."
    )
    lognormal_mu: float = Field(description="Mean of log(tokens) for the lognormal fit.")
    lognormal_sigma: float = Field(ge=0, description="Std. dev. of log(tokens), lognormal fit.")
    mean: float = Field(ge=0, description="Mean token count.")

    @field_validator("percentiles")
    @classmethod
    def _check_percentiles(cls, value: dict[float, float]) -> dict[float, float]:
        if 0 not in value or 100 not in value:
            raise ValueError("percentiles must include 0 (min) and 100 (max)")
        if any(p < 0 or p > 100 for p in value):
            raise ValueError("percentile keys must lie in 0..100")
        ordered = [value[k] for k in sorted(value)]
        if any(b < a for a, b in itertools.pairwise(ordered)):
            raise ValueError("percentile values must not decrease")
        if ordered[0] < 0:
            raise ValueError("token counts must be >= 0")
        return dict(sorted(value.items()))

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """Inverse CDF at probabilities ``u`` in [0, 1]: piecewise-linear between percentiles
        in log(1 + tokens) space, rounded to integer tokens."""
        ps = np.array(list(self.percentiles), dtype=np.float64) / 100.0
        vs = np.log1p(np.array(list(self.percentiles.values()), dtype=np.float64))
        return np.rint(np.expm1(np.interp(u, ps, vs))).astype(np.int64)

    @classmethod
    def from_samples(cls, values: np.ndarray) -> LengthDistribution:
        """Summarise observed token counts (at least one value)."""
        vals = np.asarray(values, dtype=np.float64)
        pct = np.percentile(vals, PERCENTILE_POINTS)
        logs = np.log(np.maximum(vals, 1.0))
        return cls(
            percentiles={
                float(p): float(round(v, 1)) for p, v in zip(PERCENTILE_POINTS, pct, strict=True)
            },
            lognormal_mu=float(logs.mean()),
            lognormal_sigma=float(logs.std()),
            mean=float(vals.mean()),
        )


class WorkloadProfile(BaseModel):
    """Summary figures of a request stream; enough to generate a look-alike workload."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Short name of the profile.")
    source: str = Field(default="", description="Where the figures come from (cite it).")
    requests: int = Field(ge=1, description="Number of requests summarised.")
    duration_s: float = Field(ge=0, description="Time from first to last arrival, seconds.")
    rate_rps: float = Field(gt=0, description="Mean arrival rate, requests per second.")
    interarrival_cv: float = Field(
        ge=0,
        description="Coefficient of variation of inter-arrival times (1 = Poisson, >1 bursty).",
    )
    input_tokens: LengthDistribution = Field(description="Prompt (input) token distribution.")
    output_tokens: LengthDistribution = Field(description="Generated (output) token distribution.")
    io_rank_correlation: float = Field(
        default=0.0, ge=-1, le=1, description="Spearman correlation of input vs output tokens."
    )

    @classmethod
    def load(cls, path: str | Path) -> WorkloadProfile:
        """Load a profile YAML/JSON file (errors name file, line and field)."""
        return load_model(cls, path)


def profile_from_requests(
    requests: Sequence[Request], *, name: str, source: str = ""
) -> WorkloadProfile:
    """Derive a profile from a loaded trace (at least two requests)."""
    if len(requests) < 2:
        raise UserInputError(f"need at least 2 requests to derive a profile, got {len(requests)}")
    arr = to_arrays(list(requests))
    arrivals = np.sort(arr.arrival_s)
    gaps = np.diff(arrivals)
    duration = float(arrivals[-1] - arrivals[0])
    mean_gap = float(gaps.mean())
    rate = (len(requests) - 1) / duration if duration > 0 else float(len(requests))
    cv = float(gaps.std() / mean_gap) if mean_gap > 0 else 0.0
    rho = stats.spearmanr(arr.input_tokens, arr.output_tokens).statistic
    rho_f = 0.0 if not np.isfinite(rho) else float(rho)
    return WorkloadProfile(
        name=name,
        source=source,
        requests=len(requests),
        duration_s=duration,
        rate_rps=rate,
        interarrival_cv=cv,
        input_tokens=LengthDistribution.from_samples(arr.input_tokens),
        output_tokens=LengthDistribution.from_samples(arr.output_tokens),
        io_rank_correlation=rho_f,
    )


def default_profile() -> WorkloadProfile:
    """The embedded default profile (derived from a public production trace; see its source)."""
    ref = resources.files("gpubalance.data").joinpath("default_profile.yaml")
    with resources.as_file(ref) as path:
        return WorkloadProfile.load(path)
