"""Analyzer on hand-built per-rank arrays: the expected numbers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gpubalance.diagnose.analyzer import analyze
from gpubalance.diagnose.model import TraceSet


def _ts(data, compute, sync, other=None, work=None, hosts=None) -> TraceSet:
    data, compute, sync = (np.asarray(x, dtype=float) for x in (data, compute, sync))
    R, S = data.shape
    other = np.zeros((R, S)) if other is None else np.asarray(other, dtype=float)
    cat = np.stack([data, compute, sync, other], axis=-1)
    wall = cat.sum(axis=-1)
    return TraceSet(
        run_id="t",
        ranks=np.arange(R),
        hosts=hosts or ["h0"] * R,
        steps=np.arange(S),
        start_s=np.cumsum(wall, axis=1),
        wall_s=wall,
        cat_s=cat,
        work=np.full((R, S), np.nan) if work is None else np.asarray(work, dtype=float),
        gpu_s=np.full((R, S), np.nan),
        world_size=R,
        sources=[f"r{r}" for r in range(R)],
        collectives=[{} for _ in range(R)],
    )


def _balanced(R=4, S=100, seed=0):
    rng = np.random.default_rng(seed)
    data = np.full((R, S), 0.001)
    compute = 0.010 + rng.uniform(-0.0002, 0.0002, size=(R, S))
    return data, compute


def test_slow_input_rank_named_with_lost_time_and_sync_wait():
    R, S = 4, 100
    data = np.full((R, S), 0.001)
    data[2] += 0.020
    compute = np.full((R, S), 0.010)
    # everyone waits at the all-reduce for rank 2: 20 ms + 1 ms transfer, rank 2 only 1 ms
    sync = np.full((R, S), 0.021)
    sync[2] = 0.001
    d = analyze(_ts(data, compute, sync))
    top = d.findings[0]
    assert (top.kind, top.rank, top.phase, top.persistence) == (
        "input_wait",
        2,
        "data",
        "persistent",
    )
    # lost per step = max busy (31 ms) - median busy (11 ms) = 20 ms, 100 steps -> 2.0 s
    assert top.lost_s == pytest.approx(2.0)
    assert d.lost_s == pytest.approx(2.0)
    # sync wait: three ranks x 20 ms x 100 steps = 6.0 rank-seconds
    assert d.sync_wait_s == pytest.approx(6.0)
    sw = next(f for f in d.findings if f.kind == "sync_wait")
    assert sw.rank == 2 and sw.phase == "sync"
    assert sw.evidence["sync_wait_s_by_rank"]["0"] == pytest.approx(2.0)
    assert sw.evidence["sync_wait_s_by_rank"]["2"] == pytest.approx(0.0)


def test_heavy_items_explained_by_work_cost():
    R, S = 4, 200
    rng = np.random.default_rng(1)
    work = rng.uniform(80, 120, size=(R, S))
    work[1] *= 3.0  # count-based sampling handed rank 1 heavy items
    compute = 1e-4 * work  # 0.1 ms per unit of work
    data = np.full((R, S), 0.001)
    sync = np.full((R, S), 0.001)
    d = analyze(_ts(data, compute, sync, work=work))
    top = d.findings[0]
    assert (top.kind, top.rank, top.phase) == ("count_partitioning", 1, "compute")
    assert top.evidence["work_fit"]["slope_s"] == pytest.approx(1e-4)
    assert top.evidence["explained_by_work"] == pytest.approx(1.0, abs=0.02)
    assert "CostBalancedDistributedSampler" in top.fix


def test_slow_compute_at_equal_work_is_not_blamed_on_partitioning():
    R, S = 4, 200
    rng = np.random.default_rng(2)
    work = rng.uniform(80, 120, size=(R, S))
    compute = 1e-4 * work
    compute[3] *= 2.0  # same work, twice as slow
    d = analyze(_ts(np.full((R, S), 0.001), compute, np.full((R, S), 0.001), work=work))
    top = d.findings[0]
    assert (top.kind, top.rank, top.phase) == ("slow_compute", 3, "compute")
    assert top.evidence["explained_by_work"] < 0.2


def test_untraced_stall_before_collective():
    R, S = 3, 80
    data, compute = _balanced(R, S)
    other = np.zeros((R, S))
    other[0] = 0.015
    d = analyze(_ts(data, compute, np.full((R, S), 0.001), other=other))
    top = d.findings[0]
    assert (top.kind, top.rank, top.phase) == ("untraced_stall", 0, "other")


def test_occasional_straggler_and_outlier_steps():
    R, S = 4, 500
    data, compute = _balanced(R, S)
    every = np.arange(0, S, 50)  # rank 1 slow at 10 steps of 500 (2 %)
    compute[1, every] += 0.010
    compute[3, 123] += 0.500  # one very slow step
    d = analyze(_ts(data, compute, np.full((R, S), 0.001)))
    occ = [f for f in d.findings if f.persistence == "occasional"]
    assert [(f.rank, f.evidence["slow_steps"]) for f in occ] == [(1, 10)]
    out = next(f for f in d.findings if f.kind == "outlier_steps")
    assert out.evidence["steps"][0]["step"] == 123 and out.evidence["steps"][0]["rank"] == 3
    assert out.evidence["steps"][0]["phase"] == "compute"


def test_balanced_job_has_no_findings():
    data, compute = _balanced(8, 300, seed=5)
    d = analyze(_ts(data, compute, np.full((8, 300), 0.001)))
    assert d.findings == []


def test_slow_host_when_all_its_ranks_straggle():
    R, S = 4, 100
    data, compute = _balanced(R, S)
    compute[2:] += 0.010
    hosts = ["a", "a", "b", "b"]
    d = analyze(_ts(data, compute, np.full((R, S), 0.001), hosts=hosts))
    host = next(f for f in d.findings if f.kind == "slow_host")
    assert host.host == "b" and host.ranks == [2, 3]


def test_slow_link_rank_on_time_but_slow_collectives():
    R, S = 4, 100
    data, compute = _balanced(R, S)
    sync = np.full((R, S), 0.002)
    sync[0] = 0.012
    d = analyze(_ts(data, compute, sync))
    link = next(f for f in d.findings if f.kind == "slow_link")
    assert link.rank == 0 and link.phase == "sync"
    assert link.evidence["mean_sync_excess_s"] == pytest.approx(0.010)


def test_early_ranks_waiting_are_not_called_slow_links():
    # two slow ranks of four: the two fast ones wait at the collective; that is not a link
    R, S = 4, 100
    data, compute = _balanced(R, S)
    compute[2:] += 0.012
    sync = np.full((R, S), 0.001)
    sync[:2] += 0.012
    d = analyze(_ts(data, compute, sync))
    assert not [f for f in d.findings if f.kind == "slow_link"]
    assert sorted(f.rank for f in d.findings if f.kind == "slow_compute") == [2, 3]
