"""Rendering of a :class:`~gpubalance.plan.PlanResult`: JSON dict, Rich tables, HTML.

Rendering only: every figure shown here was computed by :mod:`gpubalance.plan`.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from gpubalance.plan.result import Candidate, PlanResult
from gpubalance.plan.sla import LatencySummary

__all__ = ["candidate_to_dict", "plan_to_dict", "render_plan", "write_plan_html"]


def _num(x: float | None) -> float | None:
    """JSON-safe float: None for missing, NaN or infinite."""
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def _latency(lat: LatencySummary | None) -> dict[str, Any] | None:
    if lat is None:
        return None
    return {k: (_num(v) if isinstance(v, float) else v) for k, v in asdict(lat).items()}


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    """One candidate as JSON-ready data (latencies in seconds, money in US dollars)."""
    lat = c.latency_growth
    fd = c.failure
    cost = c.cost
    return {
        "gpu": c.shape.gpu,
        "gpus_per_node": c.shape.gpus_per_node,
        "tp": c.shape.tp,
        "replicas_per_node": c.shape.replicas_per_node,
        "status": c.status,
        "nodes": c.nodes,
        "nodes_now": c.nodes_now,
        "nodes_min": c.nodes_min,
        "spare_nodes": c.spare_nodes,
        "gpus_total": c.gpus_total,
        "replicas_needed_now": c.replicas_now,
        "replicas_needed_growth": c.replicas_growth,
        "price_gpu_hour_usd": c.price_gpu_hour_usd,
        "price_source": c.price_source,
        "monthly_cost_usd": _num(c.month_usd),
        "monthly_cost_without_spare_usd": _num(c.min_month_usd),
        "cost_breakdown_month_usd": None if cost is None else asdict(cost),
        "usd_per_million_tokens_now": _num(c.usd_per_million_tokens_now),
        "usd_per_million_tokens_growth": _num(c.usd_per_million_tokens_growth),
        "rps_per_gpu_growth": _num(c.rps_per_gpu_growth),
        "p99_ttft_s": None if lat is None else _num(lat.ttft_p99_s),
        "p99_e2e_s": None if lat is None else _num(lat.e2e_p99_s),
        "p95_ttft_s": None if lat is None else _num(lat.ttft_p95_s),
        "p95_e2e_s": None if lat is None else _num(lat.e2e_p95_s),
        "meets_sla_now": c.meets_sla_now,
        "meets_sla_growth": c.meets_sla_growth,
        "latency_now": _latency(c.latency_now),
        "latency_growth": _latency(c.latency_growth),
        "latency_one_node_down_now": _latency(c.latency_one_down_now),
        "latency_one_node_down_growth": _latency(c.latency_one_down_growth),
        "failure_domain": None
        if fd is None
        else {
            "gpus_lost_one_node": fd.gpus_lost,
            "replicas_lost_one_node": fd.replicas_lost,
            "capacity_lost_fraction_one_node": fd.capacity_lost_fraction,
            "spare_replicas": fd.spare_replicas,
            "sla_holds_one_node_down_now": fd.sla_holds_one_node_down_now,
            "sla_holds_one_node_down_growth": fd.sla_holds_one_node_down_growth,
            "one_node_down_simulated": c.one_node_down_simulated,
        },
        "memory": {
            "weights_per_gpu_bytes": c.fit.weights_per_gpu_bytes,
            "kv_capacity_tokens": c.fit.kv_capacity_tokens,
            "arithmetic": c.fit.explanation,
        },
        "lower_bound_monthly_cost_usd": _num(c.lower_bound_month_usd),
        "best_latency": _latency(c.best_latency),
        "note": c.note,
    }


def plan_to_dict(result: PlanResult) -> dict[str, Any]:
    """The whole plan as JSON-ready data: ``recommendation``, ``candidates`` and more."""
    inp = result.inputs
    rec = result.recommendation
    return {
        "inputs": {
            "model": inp.model,
            "precision": inp.precision,
            "workload": inp.workload,
            "rate_now_rps": inp.rate_now_rps,
            "growth_monthly": inp.growth_monthly,
            "months": inp.months,
            "rate_growth_rps": inp.rate_growth_rps,
            "sla": inp.sla.model_dump(),
            "requests_per_simulation": inp.requests_per_simulation,
            "mean_input_tokens": inp.mean_input_tokens,
            "mean_output_tokens": inp.mean_output_tokens,
            "hours_per_month": inp.hours_per_month,
            "spare_node": inp.spare_node,
        },
        "recommendation": None
        if rec is None
        else {**candidate_to_dict(rec), "explanation": result.explanation},
        "runner_up": None if result.runner_up is None else candidate_to_dict(result.runner_up),
        "candidates": [candidate_to_dict(c) for c in result.candidates],
        "dropped": [{"gpu": f.gpu, "tp": f.tp, "reason": f.explanation} for f in result.dropped],
        "stats": {
            "simulations": result.stats.simulations,
            "cache_hits": result.stats.cache_hits,
            "simulated_requests": result.stats.simulated_requests,
            "wall_s": result.stats.wall_s,
            "simulated_requests_per_s": result.stats.simulated_requests_per_s,
        },
    }


def _s(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "inf"
    return f"{x:.2f}"


def render_plan(result: PlanResult, console: Console, *, limit: int = 15) -> None:
    """Candidates table (sized ones, best first), the recommendation and its reasons."""
    inp = result.inputs
    console.print(
        f"[bold]gpubalance plan[/]: {inp.model} at {inp.precision}; {inp.workload}; "
        f"{inp.rate_now_rps:.3g} req/s today -> {inp.rate_growth_rps:.3g} req/s after "
        f"{inp.months} months at {inp.growth_monthly:.1%}/month; SLA {inp.sla.describe()}"
    )
    ok = [c for c in result.candidates if c.status == "ok"]
    table = Table(title="Candidates sized for the projected load, best first")
    table.add_column("GPU", no_wrap=True)
    for col in (
        "GPUs/node",
        "TP",
        "nodes",
        "$/month",
        "$/Mtok",
        "p99 TTFT",
        "p99 e2e",
        "1-node loss",
        "N-1",
    ):
        table.add_column(col, justify="right")
    for c in ok[:limit]:
        fd = c.failure
        lat = c.latency_growth
        table.add_row(
            c.shape.gpu,
            str(c.shape.gpus_per_node),
            str(c.shape.tp),
            f"{c.nodes_now}->{c.nodes}",
            f"{c.month_usd or 0:,.0f}",
            f"{c.usd_per_million_tokens_now or 0:.3f}",
            _s(None if lat is None else lat.ttft_p99_s),
            _s(None if lat is None else lat.e2e_p99_s),
            "-" if fd is None else f"{fd.capacity_lost_fraction:.0%}",
            "-" if fd is None else ("ok" if fd.sla_holds_one_node_down_growth else "no"),
            style="bold green" if c is result.recommendation else None,
        )
    console.print(table)
    console.print(
        "[dim]nodes: needed today -> deployed for the projected load; latencies in seconds "
        "at the projected load; N-1: SLA still met at that load with one node down[/]"
    )
    rest = len(ok) - min(len(ok), limit)
    pruned = sum(c.status == "pruned" for c in result.candidates)
    infeasible = sum(c.status == "infeasible" for c in result.candidates)
    console.print(
        f"[dim]{rest} more sized, {pruned} pruned (dearer than the best by analytic bound), "
        f"{infeasible} cannot meet the SLA, {len(result.dropped)} (GPU, TP) pairs do not fit "
        f"the model; {result.stats.simulations} simulations, "
        f"{result.stats.simulated_requests:,} simulated requests in {result.stats.wall_s:.1f} s "
        f"({result.stats.simulated_requests_per_s:,.0f} req/s)[/]"
    )
    rec = result.recommendation
    if rec is not None:
        console.print(
            f"\n[bold green]Recommendation:[/] {rec.nodes} x {rec.shape.label} "
            f"({rec.gpus_total} GPUs), ${rec.month_usd or 0:,.0f}/month"
        )
        for line in result.explanation:
            console.print(f"  - {line}", highlight=False)


def write_plan_html(result: PlanResult, path: str | Path) -> Path:
    """Self-contained HTML report: inputs, recommendation, candidates, cost vs p99 scatter,
    latency CDFs of the recommended vs runner-up fleet, utilisation. Written atomically."""
    from gpubalance.report.html import HtmlReport, new_figure

    inp = result.inputs
    page = HtmlReport(f"gpubalance plan: {inp.model} at {inp.precision}")
    page.add_text(
        "Inputs",
        f"Workload: {inp.workload}. Load: {inp.rate_now_rps:.3g} req/s today, "
        f"{inp.rate_growth_rps:.3g} req/s after {inp.months} months at "
        f"{inp.growth_monthly:.1%}/month. SLA: {inp.sla.describe()}. Mean request: "
        f"{inp.mean_input_tokens:.0f} input + {inp.mean_output_tokens:.0f} output tokens. "
        f"{inp.requests_per_simulation} requests per simulation.",
    )
    rec = result.recommendation
    if rec is not None:
        page.add_text(
            "Recommendation",
            f"{rec.nodes} x {rec.shape.label} ({rec.gpus_total} GPUs), "
            f"${rec.month_usd or 0:,.0f}/month.\n\n" + "\n\n".join(result.explanation),
        )
    ok = [c for c in result.candidates if c.status == "ok"]
    cols = [
        "shape",
        "nodes today",
        "nodes",
        "GPUs",
        "$/month",
        "$/M tokens",
        "p99 TTFT s",
        "p99 e2e s",
        "p95 TTFT s",
        "p95 e2e s",
        "1-node loss",
        "N-1 holds (growth)",
    ]
    rows = []
    for c in ok:
        lat = c.latency_growth
        fd = c.failure
        assert lat is not None and fd is not None
        rows.append(
            [
                c.shape.label,
                c.nodes_now,
                c.nodes,
                c.gpus_total,
                round(c.month_usd or 0.0),
                c.usd_per_million_tokens_now,
                lat.ttft_p99_s,
                lat.e2e_p99_s,
                lat.ttft_p95_s,
                lat.e2e_p95_s,
                f"{fd.capacity_lost_fraction:.0%}",
                "yes" if fd.sla_holds_one_node_down_growth else "no",
            ]
        )
    page.add_table("Candidates sized for the projected load", cols, rows)

    fig, ax = new_figure()
    for c in ok:
        lat = c.latency_growth
        assert lat is not None
        is_rec = c is rec
        ax.scatter(
            [c.month_usd or 0.0],
            [lat.ttft_p99_s],
            s=60 if is_rec else 25,
            c="#c44e52" if is_rec else "#4c72b0",
            zorder=3 if is_rec else 2,
        )
        if is_rec or c is result.runner_up:
            ax.annotate(
                c.shape.label,
                (c.month_usd or 0.0, lat.ttft_p99_s),
                fontsize=8,
                xytext=(4, 4),
                textcoords="offset points",
            )
    if inp.sla.ttft_p99_s is not None:
        ax.axhline(inp.sla.ttft_p99_s, color="#888", linestyle="--", label="SLA p99 TTFT")
        ax.legend(loc="upper right")
    ax.set_xlabel("monthly cost (US$)")
    ax.set_ylabel("p99 TTFT at projected load (s)")
    ax.set_xscale("log")
    page.add_figure(
        "Cost vs p99 TTFT", fig, "Each point is one shape sized to meet the SLA; red: recommended."
    )

    if result.samples:
        fig, (ax1, ax2) = _two_axes()
        shapes = {"recommended": result.recommendation, "runner-up": result.runner_up}
        for label, smp in result.samples.items():
            cand = shapes.get(label)
            name = label if cand is None else f"{label}: {cand.nodes} x {cand.shape.label}"
            for ax_, values in ((ax1, smp.ttft_s), (ax2, smp.e2e_s)):
                v = np.sort(values)
                if v.size:
                    ax_.plot(v, np.arange(1, v.size + 1) / v.size, label=name)
        for ax_, name in ((ax1, "TTFT (s)"), (ax2, "end-to-end (s)")):
            ax_.set_xscale("log")
            ax_.set_xlabel(name)
            ax_.set_ylabel("fraction of requests")
            ax_.axhline(0.99, color="#888", linestyle=":", linewidth=1)
            ax_.legend(loc="lower right")
        page.add_figure(
            "Latency CDFs at the projected load",
            fig,
            "Recommended vs runner-up fleet; dotted line: p99.",
        )
        rs = result.samples.get("recommended")
        if rs is not None and rs.sample_s.size:
            fig, (ax1, ax2) = _two_axes()
            ax1.bar(np.arange(rs.replica_busy_fraction.size), rs.replica_busy_fraction)
            ax1.set_xlabel("replica")
            ax1.set_ylabel("busy fraction")
            ax1.set_ylim(0, 1)
            ax2.plot(rs.sample_s, rs.running, label="running")
            ax2.plot(rs.sample_s, rs.waiting, label="waiting")
            ax2.set_xlabel("simulated time (s)")
            ax2.set_ylabel("sequences (fleet)")
            ax2.legend(loc="upper right")
            page.add_figure(
                "Utilisation of the recommended fleet",
                fig,
                "Busy fraction per replica, and sequences running / waiting over time.",
            )
    pruned = [c for c in result.candidates if c.status != "ok"]
    if pruned:
        page.add_table(
            "Not sized",
            ["shape", "status", "why"],
            [[c.shape.label, c.status, c.note] for c in pruned],
        )
    if result.dropped:
        page.add_table(
            "Does not fit (memory)",
            ["GPU", "TP", "arithmetic"],
            [[f.gpu, f.tp, f.explanation] for f in result.dropped],
        )
    return page.write(path)


def _two_axes() -> tuple[Any, tuple[Any, Any]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 4.0), layout="constrained")
    return fig, (fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2))
