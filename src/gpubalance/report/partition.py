"""Rendering of ``gpubalance partition`` results: Rich table, JSON rows, HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from gpubalance.balance.compare import PolicyResult

__all__ = ["partition_html", "partition_json", "partition_table"]


def partition_json(results: list[PolicyResult]) -> list[dict[str, Any]]:
    """One JSON-ready dict per policy."""
    return [r.to_dict() for r in results]


def partition_table(results: list[PolicyResult], *, title: str) -> Table:
    """Rich table: count baseline beside the cost-based policies."""
    budget = any(r.packing is not None for r in results)
    table = Table(
        title=title,
        title_justify="left",
        caption="rank cost in seconds; LB = max(total/k, largest item); step = mean over "
        "data-parallel steps of slowest rank / mean rank",
        caption_justify="left",
    )
    for name in ("policy", "min s", "mean s", "max s", "mksp/LB", "max/mean", "CV", "step"):
        table.add_column(name, justify="left" if name == "policy" else "right")
    table.add_column("worst step", justify="right")
    table.add_column("steps", justify="right")
    if budget:
        table.add_column("µb/step", justify="right")
        table.add_column("packing", justify="right")
    for r in results:
        m = r.metrics
        costs = m.rank_costs_s
        mean = sum(costs) / len(costs)
        row = [
            r.policy,
            f"{min(costs):,.1f}",
            f"{mean:,.1f}",
            f"{max(costs):,.1f}",
            f"{m.makespan_over_lower_bound:.4f}",
            f"{m.max_over_mean:.4f}",
            f"{m.cv:.4f}",
            f"{r.step_max_over_mean:.4f}",
            f"{r.step_worst:.3f}",
            str(r.steps),
        ]
        if budget:
            row.append(f"{r.microbatches_per_step:.2f}")
            row.append("-" if r.packing is None else f"{r.packing.useful:.1%}")
        table.add_row(*row)
    return table


def partition_html(results: list[PolicyResult], *, title: str, path: str | Path) -> Path:
    """Self-contained HTML page: the table and a per-rank cost plot per policy."""
    from gpubalance.report.html import HtmlReport, new_figure

    page = HtmlReport(title)
    rows = [
        [
            r.policy,
            r.metrics.makespan_over_lower_bound,
            r.metrics.max_over_mean,
            r.metrics.cv,
            r.step_max_over_mean,
            r.step_worst,
            r.steps,
        ]
        for r in results
    ]
    page.add_table(
        "Policies",
        ["policy", "makespan/LB", "max/mean", "CV", "step max/mean", "worst step", "steps"],
        rows,
    )
    fig, ax = new_figure()
    for r in results:
        ax.plot(range(r.metrics.ranks), r.metrics.rank_costs_s, marker=".", label=r.policy)
    ax.set_xlabel("rank")
    ax.set_ylabel("total cost (s)")
    ax.legend()
    page.add_figure("Per-rank cost of the global partition", fig)
    return page.write(path)
