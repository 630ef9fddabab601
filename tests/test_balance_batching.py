"""Budgeted micro-batches and step-synchronous plans."""

from __future__ import annotations

import numpy as np
import pytest

from gpubalance.balance import BatchConstraint, pack_micro_batches, packing_stats
from gpubalance.balance.batching import balanced_step_plan, count_step_plan, equalize_batch_count
from gpubalance.balance.batching.pack_kernels import pack_greedy_py
from gpubalance.balance.batching.pack_kernels_numba import pack_greedy_nb
from gpubalance.errors import UserInputError


def test_padded_packing_hand_case() -> None:
    # ascending 1,1,1 | 2,2 | 4 under items x max <= 4:
    # 3x1 = 3 fits, 4x2 = 8 does not; 2x2 = 4 fits, 3x4 = 12 does not; 4 alone.
    costs = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 4.0])
    batches = pack_micro_batches(costs, BatchConstraint(max_cost_s=4.0), backend="python")
    assert [b.tolist() for b in batches] == [[0, 1, 2], [3, 4], [5]]
    st = packing_stats(batches, costs, 4.0)
    assert st.fill == pytest.approx((3 + 4 + 4) / 12)
    assert st.useful == pytest.approx(11 / 12)
    assert st.padding_waste == 0.0


def test_packed_two_pointer_hand_case() -> None:
    # largest first, then fill from the small end: [4], [2,2], [1,1,1]
    costs = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 4.0])
    c = BatchConstraint(max_cost_s=4.0, padding=False)
    batches = pack_micro_batches(costs, c)
    assert sorted(sorted(costs[b].tolist()) for b in batches) == [[1, 1, 1], [2, 2], [4]]
    # 3 + 3 + 2 + 1 + 1 under 5: [3,1,1], [3], [2]? no: [3 then 1,1]=5, [3,2]=5 -> 2 batches
    c5 = BatchConstraint(max_cost_s=5.0, padding=False)
    got = pack_micro_batches(np.array([3.0, 3.0, 2.0, 1.0, 1.0]), c5)
    assert len(got) == 2


def test_token_budget_with_quadratic_term() -> None:
    # lengths 10,10,20 with quadratic_tokens=10: measure L + L^2/10 = 20, 20, 60
    c = BatchConstraint(max_tokens=60, quadratic_tokens=10)
    assert c.token_measure(np.array([10, 20])).tolist() == [20.0, 60.0]
    costs = np.array([1.0, 1.0, 2.0])
    batches = pack_micro_batches(costs, c, tokens=np.array([10, 10, 20]), backend="python")
    # [10,10]: 2 x 20 = 40 fits; adding 20: 3 x 60 = 180 > 60 -> [20] alone (60 <= 60)
    assert [b.tolist() for b in batches] == [[0, 1], [2]]


def test_caps_are_strict_and_item_too_big_is_an_error() -> None:
    rng = np.random.default_rng(0)
    costs = rng.lognormal(0, 1, size=500)
    tokens = rng.integers(1, 4000, size=500)
    c = BatchConstraint(max_cost_s=float(costs.max()) * 3, max_tokens=20000, max_items=7)
    batches = pack_micro_batches(costs, c, tokens=tokens)
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    for b in batches:
        assert c.fits(costs[b], tokens[b])
        assert b.shape[0] <= 7
    with pytest.raises(UserInputError, match="budget smaller than one item"):
        pack_micro_batches(np.array([1.0, 5.0]), BatchConstraint(max_cost_s=2.0))
    with pytest.raises(UserInputError, match="at least one limit"):
        BatchConstraint()


def _min_consecutive_batches(costs_sorted: np.ndarray, budget: float) -> int:
    """Fewest consecutive runs with len x max <= budget, by dynamic programming."""
    n = costs_sorted.shape[0]
    best = [0] + [10**9] * n
    for j in range(1, n + 1):
        for i in range(j):
            run = costs_sorted[i:j]
            if run.shape[0] * run.max() <= budget:
                best[j] = min(best[j], best[i] + 1)
    return best[n]


def test_greedy_is_minimal_and_numba_equals_python() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        costs = np.round(rng.lognormal(0, 1, size=n), 2)
        budget = float(costs.max()) * float(rng.uniform(1, 4))
        order = np.argsort(costs, kind="stable").astype(np.int64)
        measure = np.zeros(n)
        ref = pack_greedy_py(order, costs, measure, budget, np.inf, 10**9)
        assert np.array_equal(ref, pack_greedy_nb(order, costs, measure, budget, np.inf, 10**9))
        assert ref.shape[0] - 1 == _min_consecutive_batches(costs[order], budget)


def test_equalize_batch_count_splits_largest() -> None:
    costs = np.array([1.0, 1.0, 1.0, 1.0, 5.0])
    out = equalize_batch_count([np.array([0, 1, 2, 3]), np.array([4])], 3, costs)
    assert [b.tolist() for b in out] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError):
        equalize_batch_count(out, 6, costs)


def _skewed(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(0, 1.2, size=n)


def test_step_plans_cover_items_with_equal_counts() -> None:
    costs = _skewed(1003, 1)  # not a multiple of k: padding like DistributedSampler
    k, gb = 8, 64
    c = BatchConstraint(max_cost_s=float(costs.max()) * 2)
    for plan in (
        count_step_plan(costs, k, gb, seed=3),
        balanced_step_plan(costs, k, gb, seed=3),
        balanced_step_plan(costs, k, gb, policy="lpt", seed=3, constraint=c),
        count_step_plan(costs, k, gb, seed=3, constraint=c),
    ):
        counts = plan.microbatch_counts()
        assert (counts == counts[:, :1]).all()  # same micro-batches per rank in every step
        per_rank = [plan.rank_items(r) for r in range(k)]
        assert {p.shape[0] for p in per_rank} == {126}  # ceil(1003 / 8)
        allidx = np.concatenate(per_rank)
        assert set(allidx.tolist()) == set(range(1003))
        assert allidx.shape[0] - 1003 == 5  # 8 x 126 - 1003 padded duplicates
        for step in plan.steps:  # every rank holds the same items count per step
            assert len({sum(b.shape[0] for b in rank) for rank in step}) == 1


def test_balanced_steps_beat_count_baseline() -> None:
    costs = _skewed(4096, 2)
    base = count_step_plan(costs, 8, 256, seed=0).mean_step_max_over_mean()
    kk = balanced_step_plan(costs, 8, 256, seed=0).mean_step_max_over_mean()
    assert kk < 1.05 < base


def test_global_batch_must_divide() -> None:
    with pytest.raises(UserInputError, match="global batch"):
        balanced_step_plan(np.ones(10), 4, 6)
    with pytest.raises(UserInputError, match="no items"):
        count_step_plan(np.ones(0), 2, 4)
