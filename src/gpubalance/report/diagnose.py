"""Rendering of a diagnosis: Rich summary, JSON-ready dict and a self-contained HTML page."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from gpubalance.diagnose.analyzer import Diagnosis

__all__ = ["diagnosis_to_json", "print_diagnosis", "write_diagnosis_html"]


def _ms(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x * 1e3:.2f}"


def diagnosis_to_json(diag: Diagnosis) -> dict[str, Any]:
    """The JSON document of ``gpubalance diagnose --json`` (``findings`` first-class)."""
    return diag.to_dict()


def print_diagnosis(console: Console, diag: Diagnosis, max_ranks: int = 64) -> None:
    """Rich summary: problems, ranked findings and a per-rank table."""
    from rich.table import Table

    console.print(
        f"[bold]run[/] {diag.run_id}: {diag.n_ranks} rank(s) of world {diag.world_size}, "
        f"{diag.n_steps} step(s); job time {diag.total_step_s:.3f} s, lost to the slowest "
        f"rank {diag.lost_s:.3f} s ({diag.lost_s / max(diag.total_step_s, 1e-12):.1%})"
    )
    for p in diag.problems:
        console.print(f"[yellow]warning:[/] {p}", markup=True, highlight=False)
    if not diag.findings:
        console.print("[green]No straggler, sync wait or outlier step found.[/]")
    else:
        t = Table(title="Findings (most time lost first)", show_lines=True)
        for col in ("#", "rank", "phase", "lost s", "finding", "fix"):
            t.add_column(col, overflow="fold")
        for n, f in enumerate(diag.findings, 1):
            t.add_row(
                str(n),
                "-" if f.rank is None else str(f.rank),
                f.phase,
                f"{f.lost_s:.3f}",
                f.title,
                f.fix,
            )
        console.print(t)
    rt = Table(title="Per rank (ms per step, means)")
    for col in ("rank", "host", "step", "data", "compute", "sync", "other", "sync wait", "slow"):
        rt.add_column(col, justify="right")
    rows = sorted(diag.ranks, key=lambda r: -r.slow_steps)[:max_ranks]
    for r in sorted(rows, key=lambda r: r.rank):
        rt.add_row(
            str(r.rank),
            r.host,
            _ms(r.step_s),
            _ms(r.data_s),
            _ms(r.compute_s),
            _ms(r.sync_s),
            _ms(r.other_s),
            _ms(r.sync_wait_s),
            str(r.slow_steps),
        )
    console.print(rt)
    if len(diag.ranks) > max_ranks:
        console.print(f"({len(diag.ranks) - max_ranks} more ranks: see --json)")


def write_diagnosis_html(diag: Diagnosis, path: str | Path) -> Path:
    """HTML page: findings, per-rank timeline heatmap and phase breakdown per rank."""
    import numpy as np

    from gpubalance.report.html import HtmlReport, new_figure

    page = HtmlReport(f"gpubalance diagnose: run {diag.run_id}")
    page.add_text(
        "Summary",
        f"{diag.n_ranks} rank(s), {diag.n_steps} step(s). Job time {diag.total_step_s:.3f} s; "
        f"lost to the slowest rank {diag.lost_s:.3f} s; total sync wait "
        f"{diag.sync_wait_s:.3f} rank-seconds.",
    )
    if diag.problems:
        page.add_text("Input problems", "\n\n".join(diag.problems))
    page.add_table(
        "Findings",
        ["#", "rank", "phase", "lost s", "finding", "fix"],
        [
            [n, "-" if f.rank is None else f.rank, f.phase, f.lost_s, f.title, f.fix]
            for n, f in enumerate(diag.findings, 1)
        ],
    )
    height = min(2.0 + 0.18 * diag.n_ranks, 14.0)
    fig, ax = new_figure(9.0, height)
    data = diag.heatmap
    # diverging around 1 (the median rank): blue = faster, red = slower
    vmax = max(1.5, float(np.nanpercentile(data, 99.5)) if data.size else 1.5)
    im = ax.imshow(
        data,
        aspect="auto",
        interpolation="nearest",
        cmap="RdBu_r",
        vmin=max(0.0, 2.0 - vmax),
        vmax=vmax,
        extent=(
            float(diag.heatmap_steps[0]) if data.size else 0.0,
            float(diag.heatmap_steps[-1] + 1) if data.size else 1.0,
            diag.n_ranks - 0.5,
            -0.5,
        ),
    )
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    if diag.n_ranks <= 32:
        ax.set_yticks(range(diag.n_ranks), [str(r) for r in diag.rank_ids])
    fig.colorbar(im, ax=ax, label="busy time / step median")
    page.add_figure(
        "Per-rank timeline",
        fig,
        "Time outside collectives per step, relative to the median rank (1 = typical).",
    )
    fig2, ax2 = new_figure(9.0, 3.5 + 0.05 * diag.n_ranks)
    labels = ("data", "compute", "sync", "other")
    colors = ("#dd8452", "#4c72b0", "#c44e52", "#8c8c8c")
    left = np.zeros(diag.n_ranks)
    ypos = np.arange(diag.n_ranks)
    for c, (lab, col) in enumerate(zip(labels, colors, strict=True)):
        vals = diag.phase_means_s[:, c] * 1e3
        ax2.barh(ypos, vals, left=left, color=col, label=lab)
        left += vals
    ax2.set_yticks(ypos, [str(r) for r in diag.rank_ids])
    ax2.invert_yaxis()
    ax2.set_xlabel("ms per step (mean)")
    ax2.set_ylabel("rank")
    ax2.legend(loc="lower right")
    page.add_figure("Phase breakdown per rank", fig2)
    page.add_table(
        "Per rank (ms per step, means)",
        ["rank", "host", "step", "data", "compute", "sync", "other", "sync wait", "slow steps"],
        [
            [
                r.rank,
                r.host,
                r.step_s * 1e3,
                r.data_s * 1e3,
                r.compute_s * 1e3,
                r.sync_s * 1e3,
                r.other_s * 1e3,
                r.sync_wait_s * 1e3,
                r.slow_steps,
            ]
            for r in diag.ranks
        ],
    )
    return page.write(path)
