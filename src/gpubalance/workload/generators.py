"""Seeded workload generators: arrival processes and token-length distributions.

Arrivals: Poisson (exponential gaps) or gamma renewal (gap CV set freely: CV > 1 is bursty)
at a mean rate in requests per second, optionally growing by a factor over the span of the
workload (the rate at the end is ``growth`` times the rate at the start, exponentially in
between). Lengths: the profile's empirical percentiles (default) or its lognormal fit, with
input/output correlation kept through a Gaussian copula. Same seed, same workload.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from scipy import stats

from gpubalance.errors import UserInputError
from gpubalance.workload.profile import LengthDistribution, WorkloadProfile, default_profile
from gpubalance.workload.request import Request

__all__ = [
    "ArrivalKind",
    "LengthKind",
    "default_workload",
    "generate_arrivals",
    "generate_lengths",
    "generate_workload",
]

ArrivalKind = Literal["poisson", "gamma"]
LengthKind = Literal["empirical", "lognormal"]


def _warp_for_growth(t: np.ndarray, rate_rps: float, growth: float) -> np.ndarray:
    """Map arrival times of a constant-rate process to a rate growing exponentially.

    Rate r(t) = r0 * g**(t/T) where T is the span the constant-rate process would cover
    (t[-1]); r0 is chosen so the same number of requests arrive with mean rate ``rate_rps``
    over the warped span. Uses the inverse of the cumulative intensity.
    """
    if growth == 1.0 or t.size == 0:
        return t
    n_span = float(t[-1]) * rate_rps  # expected count over the unwarped span
    k = math.log(growth)
    # choose span S so that integral_0^S r0*exp(k s/S) ds = n_span with mean rate rate_rps
    span = n_span / rate_rps
    r0 = rate_rps * k / (growth - 1.0)
    # Lambda(s) = r0*S/k*(exp(k s/S)-1); invert at Lambda = t*rate_rps
    lam = t * rate_rps
    return span / k * np.log1p(lam * k / (r0 * span))


def generate_arrivals(
    n: int,
    rate_rps: float,
    *,
    kind: ArrivalKind = "poisson",
    cv: float = 1.0,
    growth: float = 1.0,
    seed: int,
) -> np.ndarray:
    """Return ``n`` sorted arrival times in seconds, the first gap starting at 0.

    Args:
        n: number of arrivals (>= 0).
        rate_rps: mean arrival rate in requests per second (> 0).
        kind: ``"poisson"`` (exponential gaps, CV 1) or ``"gamma"`` (gap CV = ``cv``).
        cv: coefficient of variation of inter-arrival gaps for ``"gamma"`` (> 0).
        growth: the rate at the end of the workload over the rate at its start (> 0).
        seed: random seed.
    """
    if n < 0:
        raise UserInputError(f"number of requests must be >= 0, got {n}")
    if not rate_rps > 0:
        raise UserInputError(f"arrival rate must be > 0 req/s, got {rate_rps}")
    if not growth > 0:
        raise UserInputError(f"growth factor must be > 0, got {growth}")
    rng = np.random.default_rng(seed)
    if kind == "poisson":
        gaps = rng.exponential(1.0 / rate_rps, size=n)
    elif kind == "gamma":
        if not cv > 0:
            raise UserInputError(f"gamma arrivals need cv > 0, got {cv}")
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, 1.0 / (rate_rps * shape), size=n)
    else:
        raise UserInputError(f"unknown arrival kind {kind!r}; known: poisson, gamma")
    return _warp_for_growth(np.cumsum(gaps), rate_rps, growth)


def _lengths_from_uniform(dist: LengthDistribution, u: np.ndarray, kind: LengthKind) -> np.ndarray:
    if kind == "empirical":
        return dist.quantile(u)
    if kind == "lognormal":
        lo = dist.percentiles[0.0]
        hi = dist.percentiles[100.0]
        z = stats.norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))
        vals = np.exp(dist.lognormal_mu + dist.lognormal_sigma * z)
        return np.rint(np.clip(vals, lo, hi)).astype(np.int64)
    raise UserInputError(f"unknown length distribution {kind!r}; known: empirical, lognormal")


def generate_lengths(
    profile: WorkloadProfile, n: int, *, kind: LengthKind = "empirical", seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return (input_tokens, output_tokens) int64 arrays of length ``n``.

    The pair keeps the profile's Spearman rank correlation through a Gaussian copula
    (Pearson correlation of the normals = 2 sin(pi * rho_s / 6)).
    """
    rng = np.random.default_rng(seed)
    rho = 2.0 * math.sin(math.pi * profile.io_rank_correlation / 6.0)
    z1 = rng.standard_normal(n)
    z2 = rho * z1 + math.sqrt(max(0.0, 1.0 - rho * rho)) * rng.standard_normal(n)
    u1 = stats.norm.cdf(z1)
    u2 = stats.norm.cdf(z2)
    return (
        _lengths_from_uniform(profile.input_tokens, u1, kind),
        _lengths_from_uniform(profile.output_tokens, u2, kind),
    )


def generate_workload(
    profile: WorkloadProfile,
    n: int,
    *,
    seed: int,
    rate_rps: float | None = None,
    arrivals: ArrivalKind | None = None,
    growth: float = 1.0,
    lengths: LengthKind = "empirical",
) -> list[Request]:
    """Generate ``n`` requests that look like ``profile``.

    Args:
        profile: summary figures to imitate.
        n: number of requests.
        seed: random seed (same seed, same workload).
        rate_rps: mean arrival rate (req/s); default the profile's.
        arrivals: ``"poisson"`` or ``"gamma"``; default gamma with the profile's CV when it
            differs from 1 by more than 0.05, else Poisson.
        growth: rate at the end over rate at the start.
        lengths: ``"empirical"`` (profile percentiles) or ``"lognormal"`` (profile fit).
    """
    rate = profile.rate_rps if rate_rps is None else rate_rps
    cv = profile.interarrival_cv
    kind: ArrivalKind = arrivals or ("gamma" if abs(cv - 1.0) > 0.05 and cv > 0 else "poisson")
    seq = np.random.SeedSequence(seed)
    s_arr, s_len = (int(s.generate_state(1)[0]) for s in seq.spawn(2))
    t = generate_arrivals(n, rate, kind=kind, cv=cv if cv > 0 else 1.0, growth=growth, seed=s_arr)
    inp, out = generate_lengths(profile, n, kind=lengths, seed=s_len)
    return [Request(str(i), float(t[i]), int(inp[i]), int(out[i])) for i in range(n)]


def default_workload(n: int = 10_000, *, seed: int = 0) -> list[Request]:
    """The embedded default workload: ``n`` requests from the default profile, fixed seed."""
    return generate_workload(default_profile(), n, seed=seed)
