"""Routing policies on hand-built backend states."""

from __future__ import annotations

from collections import Counter

import pytest

from gpubalance.errors import UserInputError
from gpubalance.route import BackendState, NoBackendAvailable, make_policy


def backends(n: int, **kw: object) -> list[BackendState]:
    return [BackendState(f"b{i}", **kw) for i in range(n)]  # type: ignore[arg-type]


def test_round_robin_cycles_and_skips_ineligible() -> None:
    bs = backends(3)
    bs[1].healthy = False
    rr = make_policy("round_robin")
    assert [rr.choose(bs) for _ in range(4)] == [0, 2, 0, 2]


def test_least_requests_picks_fewest_per_weight() -> None:
    bs = backends(3)
    bs[0].in_flight, bs[1].in_flight, bs[2].in_flight = 4, 2, 3
    bs[2].weight = 2.0  # 3/2 = 1.5 < 2
    assert make_policy("least_requests").choose(bs) == 2


def test_least_cost_differs_from_least_requests() -> None:
    # b0: one huge request in flight; b1: three tiny ones.
    bs = backends(2)
    bs[0].start(10.0)
    for _ in range(3):
        bs[1].start(0.1)
    assert make_policy("least_requests").choose(bs) == 0
    assert make_policy("least_cost").choose(bs, cost_s=1.0) == 1


def test_least_cost_ties_rotate() -> None:
    bs = backends(4)
    pol = make_policy("least_cost")
    assert sorted(pol.choose(bs) for _ in range(4)) == [0, 1, 2, 3]


def test_weighted_exact_shares_in_every_window() -> None:
    bs = backends(3)
    for b, w in zip(bs, (5.0, 1.0, 1.0), strict=True):
        b.weight = w
    pol = make_policy("weighted")
    picks = [pol.choose(bs) for _ in range(70)]
    for start in range(0, 70, 7):
        assert Counter(picks[start : start + 7]) == {0: 5, 1: 1, 2: 1}
    # smooth: the heavy backend never runs more than 3 in a row (nginx SWRR gives a a b a c a a)
    assert picks[:7] == [0, 0, 1, 0, 2, 0, 0]


def test_power_of_two_is_seeded_and_avoids_the_loaded() -> None:
    bs = backends(2)
    bs[0].in_flight = 5
    pol = make_policy("power_of_two", seed=1)
    assert all(pol.choose(bs) == 1 for _ in range(20))
    bs4 = backends(4)
    seq1 = [make_policy("power_of_two", seed=7).choose(bs4) for _ in range(1)]
    seq2 = [make_policy("power_of_two", seed=7).choose(bs4) for _ in range(1)]
    assert seq1 == seq2


def test_no_eligible_backend_raises() -> None:
    bs = backends(2)
    bs[0].draining = True
    bs[1].weight = 0.0
    for name in ("round_robin", "least_requests", "least_cost", "power_of_two", "weighted"):
        with pytest.raises(NoBackendAvailable):
            make_policy(name).choose(bs)


def test_unknown_policy_suggests() -> None:
    with pytest.raises(UserInputError, match="least_cost"):
        make_policy("least-cost")


def test_finish_restores_zero() -> None:
    b = BackendState("x")
    for c in (0.1, 0.2, 0.3):
        b.start(c)
    for c in (0.1, 0.2, 0.3):
        b.finish(c)
    assert (b.in_flight, b.in_flight_cost_s) == (0, 0.0)


def test_scraped_queue_is_not_counted_twice() -> None:
    # b0: 4 of our requests, which the backend reports as 1 running + 3 waiting (same ones);
    # b1: 2 of ours, but the backend reports 6 (another gateway shares it).
    bs = backends(2)
    bs[0].in_flight, bs[0].running, bs[0].waiting = 4, 1, 3
    bs[1].in_flight, bs[1].running, bs[1].waiting = 2, 2, 4
    assert make_policy("least_requests").choose(bs) == 0  # 4 < 6; summing would say 8 > 6
