"""Seeded generators: rates, burstiness, growth, lengths and correlation against theory."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from gpubalance.errors import UserInputError
from gpubalance.workload import (
    LengthDistribution,
    WorkloadProfile,
    default_profile,
    default_workload,
    generate_arrivals,
    generate_workload,
    profile_from_requests,
)


def test_poisson_rate_and_cv() -> None:
    t = generate_arrivals(200_000, 50.0, seed=1)
    gaps = np.diff(t)
    assert np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(1 / 50.0, rel=0.01)  # sd of the mean ~0.2%
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.02)


def test_gamma_burstiness() -> None:
    t = generate_arrivals(200_000, 10.0, kind="gamma", cv=3.0, seed=2)
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.05)


def test_growth_shapes_rate_exponentially() -> None:
    # r(t) = r0 * g**(t/S): counts in the last vs first tenth of the span differ by g**0.9.
    g = 4.0
    t = generate_arrivals(400_000, 100.0, growth=g, seed=3)
    span = t[-1]
    first = np.count_nonzero(t < 0.1 * span)
    last = np.count_nonzero(t > 0.9 * span)
    assert last / first == pytest.approx(g**0.9, rel=0.03)
    assert len(t) / span == pytest.approx(100.0, rel=0.01)  # mean rate unchanged


def test_same_seed_same_workload_other_seed_differs() -> None:
    a = default_workload(500, seed=5)
    b = default_workload(500, seed=5)
    c = default_workload(500, seed=6)
    assert a == b
    assert a != c


def test_default_workload_follows_profile_percentiles() -> None:
    prof = default_profile()
    reqs = default_workload(20_000, seed=0)
    inp = np.array([r.input_tokens for r in reqs])
    for p in (25, 50, 90):
        assert np.percentile(inp, p) == pytest.approx(prof.input_tokens.percentiles[p], rel=0.05)
    assert inp.min() >= prof.input_tokens.percentiles[0]
    assert inp.max() <= prof.input_tokens.percentiles[100]


def _profile(rho: float) -> WorkloadProfile:
    dist = LengthDistribution(
        percentiles={0: 1, 50: 100, 100: 10_000}, lognormal_mu=4.6, lognormal_sigma=1.0, mean=150
    )
    return WorkloadProfile(
        name="t",
        requests=10,
        duration_s=10,
        rate_rps=5,
        interarrival_cv=1.0,
        input_tokens=dist,
        output_tokens=dist,
        io_rank_correlation=rho,
    )


def test_copula_keeps_rank_correlation() -> None:
    reqs = generate_workload(_profile(0.6), 50_000, seed=9)
    rho = stats.spearmanr([r.input_tokens for r in reqs], [r.output_tokens for r in reqs])
    assert rho.statistic == pytest.approx(0.6, abs=0.02)


def test_lognormal_lengths_median() -> None:
    reqs = generate_workload(_profile(0.0), 50_000, seed=4, lengths="lognormal")
    # median of a lognormal is exp(mu) = exp(4.6) ~ 99.5
    assert np.median([r.input_tokens for r in reqs]) == pytest.approx(np.exp(4.6), rel=0.03)


def test_profile_round_trip_from_requests() -> None:
    reqs = generate_workload(_profile(0.0), 20_000, seed=1, rate_rps=40.0)
    prof = profile_from_requests(reqs, name="x")
    assert prof.rate_rps == pytest.approx(40.0, rel=0.03)
    assert prof.interarrival_cv == pytest.approx(1.0, rel=0.05)  # cv 1.0 -> Poisson
    assert prof.input_tokens.percentiles[50] == pytest.approx(100, rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 10, "rate_rps": 0.0}, "rate must be > 0"),
        ({"n": -1, "rate_rps": 1.0}, "must be >= 0"),
        ({"n": 10, "rate_rps": 1.0, "growth": 0.0}, "growth"),
        ({"n": 10, "rate_rps": 1.0, "kind": "gamma", "cv": 0.0}, "cv > 0"),
    ],
)
def test_bad_generator_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UserInputError, match=match):
        generate_arrivals(seed=0, **kwargs)  # type: ignore[arg-type]


def test_bad_profile_file_names_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "p.yaml"
    dist = "{percentiles: {0: 1, 100: 2}, lognormal_mu: 0, lognormal_sigma: 1, mean: 1}"
    p.write_text(
        "name: x\nrequests: 5\nduration_s: 1\nrate_rps: -2\ninterarrival_cv: 1\n"
        f"input_tokens: {dist}\noutput_tokens: {dist}\n"
    )
    with pytest.raises(UserInputError, match=r"p\.yaml:4: field 'rate_rps'"):
        WorkloadProfile.load(p)
