"""The planner on a hand-made stand-in backend whose answers are known in closed form.

Stand-in: a replica of GPU ``g`` at tensor-parallel degree ``tp`` serves ``mu`` req/s
(``mu1[g] * tp * eff[tp]``) and has an unloaded p99 TTFT ``base1[g] / tp``; under load
``rho = rate / (replicas * mu)`` its p99 TTFT is ``base / (1 - rho)`` (infinite at
rho >= 1) and p99 e2e is TTFT + 5 s. So the SLA "p99 TTFT <= B" holds exactly when
``replicas >= rate / (mu * (1 - base / B))``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpubalance.errors import UserInputError
from gpubalance.plan import (
    GpuOffer,
    LatencySamples,
    LatencySummary,
    PlanSettings,
    ReplicaFit,
    Shape,
    Sla,
    make_plan,
)

EFF = {1: 1.0, 2: 0.9, 4: 0.8, 8: 0.7}
GB = 10**9


class StandIn:
    def __init__(self, model_gb: float = 30.0) -> None:
        self.model_gb = model_gb
        self.mu1 = {"big": 10.0, "small": 3.0}
        self.base1 = {"big": 0.4, "small": 1.0}
        self.mem_gb = {"big": 80, "small": 24}
        self.price = {"big": 4.0, "small": 0.9}
        self.calls = 0

    def offers(self) -> list[GpuOffer]:
        return [GpuOffer(g, self.mem_gb[g] * GB, 8, self.price[g], "stand-in") for g in self.mu1]

    def fit(self, gpu: str, tp: int) -> ReplicaFit:
        fits = self.mem_gb[gpu] * tp >= self.model_gb
        why = f"needs {self.model_gb:g} GB > {self.mem_gb[gpu] * tp} GB on {tp} x {gpu}"
        return ReplicaFit(gpu, tp, fits, why, int(self.model_gb / tp * GB), 1000)

    def mu(self, gpu: str, tp: int) -> float:
        return self.mu1[gpu] * tp * EFF[tp]

    def capacity_rps(self, gpu: str, tp: int) -> float:
        return self.mu(gpu, tp)

    def mean_tokens_per_request(self) -> float:
        return 1000.0

    def evaluate(
        self, gpu: str, tp: int, replicas: int, rate_rps: float, sla: Sla | None
    ) -> LatencySummary:
        self.calls += 1
        rho = rate_rps / (replicas * self.mu(gpu, tp))
        base = self.base1[gpu] / tp
        ttft = base / (1 - rho) if rho < 1 else math.inf
        stop = rho >= 1 and sla is not None
        return LatencySummary(
            ttft_p95_s=0.5 * ttft,
            ttft_p99_s=ttft,
            e2e_p95_s=0.5 * (ttft + 5),
            e2e_p99_s=ttft + 5,
            e2e_mean_s=ttft / 2 + 2,
            throughput_rps=rate_rps,
            gpu_busy_fraction=min(rho, 1.0),
            requests=1000,
            completed=10 if stop else 1000,
            stopped_early=stop,
        )

    def samples(self, gpu: str, tp: int, replicas: int, rate_rps: float) -> LatencySamples:
        z = np.zeros(3)
        return LatencySamples(z, z, z, z, z, z)


def settings(**kw: object) -> PlanSettings:
    base: dict[str, object] = dict(
        rate_rps=20.0,
        sla=Sla(ttft_p99_s=2.0, e2e_p99_s=None),
        growth_monthly=0.5,
        months=2,
        model="m",
        precision="bf16",
    )
    base.update(kw)
    return PlanSettings(**base)  # type: ignore[arg-type]


def brute_force_min(backend: StandIn, gpu: str, tp: int, rate: float, sla: Sla) -> int:
    for r in range(1, 10_000):
        if sla.met(backend.evaluate(gpu, tp, r, rate, None)):
            return r
    raise AssertionError("no threshold")


def test_sizes_every_shape_to_the_true_minimum() -> None:
    backend = StandIn()
    plan = make_plan(backend, settings(prune=False))
    sla = Sla(ttft_p99_s=2.0, e2e_p99_s=None)
    ok = [c for c in plan.candidates if c.status == "ok"]
    assert len(ok) == 10 + 6  # big: every shape; small: all but TP1 (24 GB < 30 GB)
    for c in ok:
        g, t = c.shape.gpu, c.shape.tp
        assert c.replicas_now == brute_force_min(backend, g, t, 20.0, sla)
        assert c.replicas_growth == brute_force_min(backend, g, t, 45.0, sla)
        assert c.nodes_min == math.ceil(c.replicas_growth / c.shape.replicas_per_node)
        assert c.nodes_now == math.ceil(c.replicas_now / c.shape.replicas_per_node)
        # a spare node exactly when nodes_min - 1 nodes would miss the SLA at 45 req/s
        slack = (c.nodes_min - 1) * c.shape.replicas_per_node >= c.replicas_growth
        assert c.nodes == c.nodes_min + (0 if slack and c.nodes_min > 1 else 1)
        assert c.failure is not None and c.failure.sla_holds_one_node_down_growth
    assert {(d.gpu, d.tp) for d in plan.dropped} == {("small", 1)}


def test_recommendation_by_hand() -> None:
    # growth 50 %/month for 2 months: 20 -> 45 req/s.
    # small TP2: mu 5.4, base 0.5 -> rho <= 0.75 -> replicas >= 45 / 4.05 = 11.1 -> 12;
    #   2-GPU nodes: 12 + 1 spare = 13 nodes = 26 GPUs x $0.9 x 730 h = $17,082 / month.
    #   (TP4: 6 replicas -> 7 x 4 GPUs = 28; TP8: 3 -> 4 x 8 = 32 GPUs.)
    # big TP1: mu 10, base 0.4 -> rho <= 0.8 -> 45 / 8 -> 6 + 1 nodes -> 7 x $4 x 730 = $20,440
    plan = make_plan(StandIn(), settings())
    rec = plan.recommendation
    assert rec is not None
    assert (rec.shape.gpu, rec.shape.gpus_per_node, rec.shape.tp) == ("small", 2, 2)
    assert (rec.nodes_now, rec.nodes_min, rec.nodes) == (5, 12, 13)  # today 20/4.05 -> 5
    assert rec.month_usd == pytest.approx(17082.0)
    assert rec.min_month_usd == pytest.approx(15768.0)
    assert rec.failure is not None
    assert rec.failure.capacity_lost_fraction == pytest.approx(1 / 13)
    assert rec.failure.sla_holds_one_node_down_now
    assert rec.failure.sla_holds_one_node_down_growth
    runner = plan.runner_up
    # runner-up: the best other (GPU, TP) pair: small TP4 on 4-GPU nodes, 7 nodes = 28 GPUs
    assert runner is not None
    assert (runner.shape.gpu, runner.shape.gpus_per_node, runner.shape.tp) == ("small", 4, 4)
    assert runner.month_usd == pytest.approx(28 * 0.9 * 730)
    big1 = next(c for c in plan.candidates if c.shape == Shape("big", 1, 1))
    assert big1.month_usd == pytest.approx(20440.0)
    assert any("does not fit one small" in line for line in plan.explanation)


def test_without_spare_node_deploys_the_minimum() -> None:
    # same numbers without the spare: small TP2 x 12 nodes = 24 GPUs = $15,768; TP4 and
    # TP8 also need 24 GPUs but only 2-GPU nodes of TP2 survive a node failure today
    # (11 replicas >= 5) at the same cost with the smallest failure domain.
    plan = make_plan(StandIn(), settings(spare_node=False))
    rec = plan.recommendation
    assert rec is not None
    assert (rec.shape.gpu, rec.shape.gpus_per_node, rec.shape.tp, rec.nodes) == (
        "small",
        2,
        2,
        12,
    )
    assert rec.month_usd == pytest.approx(15768.0)
    assert rec.failure is not None and not rec.failure.sla_holds_one_node_down_growth


def test_tighter_sla_never_costs_less() -> None:
    costs = []
    for bound in (4.0, 2.0, 1.0, 0.6):
        plan = make_plan(StandIn(), settings(sla=Sla(ttft_p99_s=bound, e2e_p99_s=None)))
        assert plan.recommendation is not None
        costs.append(plan.recommendation.month_usd)
    assert costs == sorted(costs)
    assert costs[0] < costs[-1]


def test_pruning_keeps_the_recommendation_and_saves_simulations() -> None:
    full, pruned = StandIn(), StandIn()
    a = make_plan(full, settings(prune=False))
    b = make_plan(pruned, settings(prune=True))
    assert a.recommendation is not None and b.recommendation is not None
    assert a.recommendation.shape == b.recommendation.shape
    assert a.recommendation.nodes == b.recommendation.nodes
    assert pruned.calls <= full.calls


def test_unmeetable_sla_names_best_achievable() -> None:
    # the lowest unloaded TTFT is big TP8: 0.4 / 8 = 0.05 s, above a 0.01 s bound
    with pytest.raises(UserInputError) as err:
        make_plan(StandIn(), settings(sla=Sla(ttft_p99_s=0.01, e2e_p99_s=None), max_replicas=64))
    msg = str(err.value)
    assert "no candidate meets the SLA" in msg
    assert "big TP8" in msg


def test_model_that_fits_nowhere_shows_memory_arithmetic() -> None:
    with pytest.raises(UserInputError) as err:
        make_plan(StandIn(model_gb=1000.0), settings())
    msg = str(err.value)
    assert "fits on no candidate GPU" in msg
    assert "needs 1000 GB > 640 GB on 8 x big" in msg


def test_prefers_fleets_that_survive_a_node_failure() -> None:
    # a single big 8-GPU node (cost equal to 8 single-GPU nodes) cannot survive losing it
    plan = make_plan(StandIn(), settings(growth_monthly=0.0, rate_rps=5.0))
    rec = plan.recommendation
    assert rec is not None and rec.failure is not None
    assert rec.failure.sla_holds_one_node_down_now
    assert rec.nodes is not None and rec.nodes >= 2


def test_explanation_speaks_the_guides_terms() -> None:
    plan = make_plan(StandIn(), settings())
    text = "\n".join(plan.explanation)
    for term in ("Memory:", "SLA (", "req/s per GPU", "Cost:", "Failure domain:", "Growth:"):
        assert term in text
    assert "20 to 45 req/s" in text  # 20 x 1.5**2
    assert "removes 8% of capacity" in text  # 1 of 13 nodes
