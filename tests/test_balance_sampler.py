"""Samplers in one process: determinism, equal lengths, coverage, exact resume."""

from __future__ import annotations

import numpy as np
import pytest

from gpubalance.balance import (
    BatchConstraint,
    CostBalancedBatchSampler,
    CostBalancedDistributedSampler,
)
from gpubalance.errors import UserInputError

COSTS = np.random.default_rng(9).lognormal(0, 1.2, size=1001)


def _ranks(k: int, **kw) -> list[list[int]]:  # type: ignore[no-untyped-def]
    out = []
    for r in range(k):
        s = CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=k, rank=r, **kw)
        s.set_epoch(kw.pop("epoch", 0) if "epoch" in kw else 0)
        out.append(list(s))
    return out


def test_equal_lengths_and_coverage() -> None:
    per_rank = _ranks(8, batch_size=4, seed=1)
    assert {len(p) for p in per_rank} == {126}  # ceil(1001 / 8)
    union = [i for p in per_rank for i in p]
    assert set(union) == set(range(1001)) and len(union) == 1008  # 7 padded duplicates
    s = CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=8, rank=0, drop_last=True)
    assert len(s) == len(list(s)) == 125
    dropped = [
        i
        for r in range(8)
        for i in CostBalancedDistributedSampler(
            costs_s=COSTS, num_replicas=8, rank=r, drop_last=True
        )
    ]
    assert len(set(dropped)) == 1000  # no duplicates, one item dropped


def test_deterministic_and_epoch_dependent() -> None:
    a = CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=4, rank=2, seed=7)
    b = CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=4, rank=2, seed=7)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first
    c = CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=4, rank=2, seed=8)
    assert list(c) != first
    plain = CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=4, rank=2, shuffle=False)
    plain.set_epoch(5)
    assert list(plain) == list(
        CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=4, rank=2, shuffle=False)
    )


def test_steps_are_balanced_versus_count() -> None:
    k, b = 8, 16
    per_rank = np.array(_ranks(k, batch_size=b, seed=2))
    ratios = []
    for s in range(0, per_rank.shape[1], b):
        rc = COSTS[per_rank[:, s : s + b]].sum(axis=1)
        ratios.append(rc.max() / rc.mean())
    assert np.mean(ratios) < 1.05


def test_exact_resume_mid_epoch() -> None:
    s = CostBalancedDistributedSampler(costs_s=COSTS, num_replicas=3, rank=1, batch_size=8, seed=4)
    s.set_epoch(2)
    full = list(s)
    it = iter(s)
    head = [next(it) for _ in range(53)]
    state = s.state_dict()
    assert state["yielded"] == 53 and state["epoch"] == 2
    fresh = CostBalancedDistributedSampler(
        costs_s=COSTS, num_replicas=3, rank=1, batch_size=8, seed=4
    )
    fresh.load_state_dict(state)
    assert head + list(fresh) == full
    assert list(fresh) == full  # the next pass is a whole epoch again
    with pytest.raises(UserInputError, match="seed"):
        CostBalancedDistributedSampler(
            costs_s=COSTS, num_replicas=3, rank=1, seed=5
        ).load_state_dict(state)


def test_dataloader_drop_in() -> None:
    torch_data = pytest.importorskip("torch.utils.data")
    sampler = CostBalancedDistributedSampler(
        range(1001), costs_s=COSTS, num_replicas=2, rank=0, batch_size=10
    )
    loader = torch_data.DataLoader(list(range(1001)), batch_size=10, sampler=sampler)
    got = [int(x) for batch in loader for x in batch]
    assert got == list(sampler)
    with pytest.raises(UserInputError, match="1001 costs"):
        CostBalancedDistributedSampler(range(5), costs_s=COSTS, num_replicas=2, rank=0)


def test_batch_sampler_equal_counts_limits_and_resume() -> None:
    c = BatchConstraint(max_cost_s=float(COSTS.max()) * 2)
    k = 4
    samplers = [
        CostBalancedBatchSampler(COSTS, c, num_replicas=k, rank=r, seed=1) for r in range(k)
    ]
    outs = [list(s) for s in samplers]
    assert len({len(o) for o in outs}) == 1 and len(outs[0]) == len(samplers[0])
    flat = [i for o in outs for b in o for i in b]
    assert sorted(flat) == list(range(1001))
    for o in outs:
        for b in o:
            assert c.fits(COSTS[b])
    s = samplers[2]
    s.set_epoch(3)
    full = list(s)
    it = iter(s)
    head = [next(it) for _ in range(5)]
    fresh = CostBalancedBatchSampler(COSTS, c, num_replicas=k, rank=2, seed=1)
    fresh.load_state_dict(s.state_dict())
    assert head + list(fresh) == full


def test_batch_sampler_fewer_items_than_ranks_repeats() -> None:
    c = BatchConstraint(max_items=1)
    outs = [
        list(CostBalancedBatchSampler([1.0, 2.0, 3.0], c, num_replicas=4, rank=r, seed=0))
        for r in range(4)
    ]
    assert [len(o) for o in outs] == [1, 1, 1, 1]
    assert {i for o in outs for b in o for i in b} == {0, 1, 2}


def test_world_from_torch_distributed_required() -> None:
    with pytest.raises(RuntimeError, match="num_replicas and rank"):
        CostBalancedDistributedSampler(costs_s=COSTS)


def test_steps_line_up_with_dataloader_batches() -> None:
    # 1001 items, 8 ranks, batch 16: 126 per rank = 7 full steps of 16 + one of 14, last
    for epoch in range(5):
        s = CostBalancedDistributedSampler(
            costs_s=COSTS, num_replicas=8, rank=3, batch_size=16, seed=epoch
        )
        s.set_epoch(epoch)
        plan = s.plan()
        counts = [plan.per_rank_count(i) for i in range(plan.n_steps)]
        assert counts == [16] * 7 + [14]


def test_batch_sampler_steps_are_balanced() -> None:
    c = BatchConstraint(max_cost_s=float(COSTS.max()))
    k = 4
    outs = [list(CostBalancedBatchSampler(COSTS, c, num_replicas=k, rank=r)) for r in range(k)]
    ratios = []
    for s in range(len(outs[0])):
        step = np.array([c.batch_cost_s(COSTS[outs[r][s]]) for r in range(k)])
        ratios.append(step.max() / step.mean())
    assert np.mean(ratios) < 1.05
