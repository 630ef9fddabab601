"""Ranking candidates and explaining the choice in the field guide's terms.

The ranking: fleets that still meet the SLA today with one node down first (when preferred),
then the lower monthly cost (to the cent), then the smaller failure domain (fewer GPUs per
node, then a smaller share of capacity lost with one node), then fewer GPUs. The guide's
rule of thumb follows from it: single-GPU nodes win unless the model's memory, the SLA or
the concurrency makes multi-GPU nodes cheaper or the only option.
"""

from __future__ import annotations

import math

from gpubalance.plan.result import Candidate, PlanInputsSummary
from gpubalance.plan.sla import LatencySummary, Sla

__all__ = ["best_achievable", "explain", "rank_key"]

_GB = 1e9


def rank_key(c: Candidate, prefer_one_down_safe: bool) -> tuple[object, ...]:
    """Sort key of a sized (``status == "ok"``) candidate: smaller is better."""
    fd = c.failure
    safe = fd is not None and fd.sla_holds_one_node_down_now
    return (
        0 if (safe or not prefer_one_down_safe) else 1,
        round(c.month_usd or math.inf, 2),
        c.shape.gpus_per_node,
        fd.capacity_lost_fraction if fd is not None else 1.0,
        c.gpus_total or 0,
        c.shape.gpu,
        c.shape.tp,
    )


def _worst_ratio(lat: LatencySummary, sla: Sla) -> float:
    return max((getattr(lat, name) / bound for name, bound in sla.bounds()), default=0.0)


def best_achievable(
    candidates: list[Candidate], sla: Sla, rate_now: float, rate_growth: float
) -> str:
    """One-line message for an SLA no shape meets: the closest shape and its latencies."""
    tried = [c for c in candidates if c.best_latency is not None]
    if not tried:
        return f"no candidate meets the SLA ({sla.describe()})"
    best = min(tried, key=lambda c: (_worst_ratio(c.best_latency, sla), c.shape))  # type: ignore[arg-type]
    lat = best.best_latency
    assert lat is not None
    return (
        f"no candidate meets the SLA ({sla.describe()}) at {rate_now:.3g} req/s "
        f"(growing to {rate_growth:.3g} req/s); best achievable: p99 TTFT {lat.ttft_p99_s:.3g} s, "
        f"p95 TTFT {lat.ttft_p95_s:.3g} s, p99 e2e {lat.e2e_p99_s:.3g} s, "
        f"p95 e2e {lat.e2e_p95_s:.3g} s on {best.shape.gpu} TP{best.shape.tp} "
        f"with {best.best_replicas_tried} replicas"
    )


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.0f}"


def explain(
    rec: Candidate,
    runner: Candidate | None,
    candidates: list[Candidate],
    inputs: PlanInputsSummary,
) -> list[str]:
    """Reasons for the recommendation: memory, SLA at concurrency, req/s per GPU, cost,
    failure domain, growth, and whether multi-GPU nodes were needed (and why)."""
    s = rec.shape
    assert rec.nodes is not None and rec.latency_growth is not None and rec.failure is not None
    lat = rec.latency_growth
    fd = rec.failure
    lines: list[str] = []
    fit = rec.fit
    mem_line = (
        f"Memory: {inputs.model or 'the model'} at {inputs.precision or 'its precision'} puts "
        f"{fit.weights_per_gpu_bytes / _GB:.1f} GB of weights on each GPU at TP{s.tp} and "
        f"leaves {fit.kv_capacity_tokens:,} tokens of KV cache per replica"
    )
    tp1_fits = any(c.fit.fits for c in candidates if c.shape.gpu == s.gpu and c.shape.tp == 1)
    if s.tp == 1:
        mem_line += f"; one {s.gpu} holds the model, so memory does not call for multi-GPU."
    elif not tp1_fits:
        mem_line += f"; one {s.gpu} cannot hold it, so the model needs TP{s.tp}."
    else:
        mem_line += f"; one {s.gpu} would hold it too, so TP{s.tp} is for speed, not memory."
    lines.append(mem_line)
    concurrency = inputs.rate_growth_rps * lat.e2e_mean_s  # Little's law
    lines.append(
        f"SLA ({inputs.sla.describe()}): at {inputs.rate_growth_rps:.3g} req/s "
        f"(about {concurrency:.0f} requests in flight) the fleet's p99 TTFT is "
        f"{lat.ttft_p99_s:.3g} s and p99 end-to-end {lat.e2e_p99_s:.3g} s "
        f"(p95: {lat.ttft_p95_s:.3g} s / {lat.e2e_p95_s:.3g} s)."
    )
    lines.append(
        f"Throughput: {rec.rps_per_gpu_growth or 0:.3g} req/s per GPU at the projected load, "
        f"GPUs busy {lat.gpu_busy_fraction:.0%} of the time."
    )
    cost_line = (
        f"Cost: {rec.nodes} x {s.label} = {rec.gpus_total} GPUs at "
        f"${rec.price_gpu_hour_usd:.2f}/GPU-hour: {_money(rec.month_usd)}/month, "
        f"${rec.usd_per_million_tokens_now or 0:.3g} per million tokens today"
    )
    if runner is not None and runner.month_usd is not None and rec.month_usd is not None:
        diff = runner.month_usd - rec.month_usd
        cost_line += (
            f"; runner-up {runner.nodes} x {runner.shape.label} costs "
            f"{_money(runner.month_usd)}/month ({'+' if diff >= 0 else '-'}"
            f"{_money(abs(diff))})"
        )
    lines.append(cost_line + ".")
    lines.append(
        f"Failure domain: one node holds {fd.gpus_lost} GPU(s); losing it removes "
        f"{fd.capacity_lost_fraction:.0%} of capacity; with one node down the SLA "
        f"{'still holds' if fd.sla_holds_one_node_down_now else 'does NOT hold'} today and "
        f"{'still holds' if fd.sla_holds_one_node_down_growth else 'does not hold'} at the "
        f"projected load"
        + (
            f" ({rec.spare_nodes} spare node(s) included; without: {rec.nodes_min} nodes, "
            f"{_money(rec.min_month_usd)}/month)."
            if rec.spare_nodes
            else "."
        )
    )
    lines.append(
        f"Growth: {inputs.growth_monthly:.1%}/month for {inputs.months} months takes "
        f"{inputs.rate_now_rps:.3g} to {inputs.rate_growth_rps:.3g} req/s: "
        f"{rec.nodes_now} node(s) needed today, {rec.nodes_min} at the horizon."
    )
    lines.append(_verdict(rec, candidates, inputs.spare_node))
    return lines


def _verdict(rec: Candidate, candidates: list[Candidate], prefer_safe: bool) -> str:
    s = rec.shape
    if s.gpus_per_node == 1:
        return (
            "Verdict: scale out on single-GPU nodes — the model fits one GPU, one GPU per "
            "replica meets the SLA, and it is the cheapest shape with the smallest failure "
            "domain."
        )
    singles = [c for c in candidates if c.shape.gpus_per_node == 1 and c.shape.gpu == s.gpu]
    ok_singles = [c for c in singles if c.status == "ok"]
    if not singles:
        reason = f"the model does not fit one {s.gpu} (memory)"
    elif not ok_singles and any(c.status == "pruned" for c in singles):
        reason = f"single-GPU {s.gpu} nodes would cost more (analytic lower bound)"
    elif not ok_singles:
        reason = f"single-GPU {s.gpu} replicas cannot meet the SLA (latency)"
    else:
        single = min(ok_singles, key=lambda c: c.month_usd or math.inf)
        cheaper = (
            f"it is cheaper than {single.nodes} single-GPU {s.gpu} nodes "
            f"({_money(single.month_usd)}/month)"
        )
        if s.tp > 1:
            reason = (
                f"the SLA favours tensor parallelism: TP{s.tp} cuts prefill time so fewer "
                f"GPUs meet it, and {cheaper}"
            )
        else:
            reason = f"at this concurrency packing {s.gpus_per_node} replicas per node: {cheaper}"
    return f"Verdict: multi-GPU nodes ({s.gpus_per_node} GPUs) because {reason}."
