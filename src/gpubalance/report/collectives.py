"""Rendering of a collective benchmark (Rich tables); JSON is ``BenchResult.to_dict()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from gpubalance.diagnose.collbench import BenchResult

__all__ = ["print_collectives"]


def _size(b: int) -> str:
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= m and b % m == 0:
            return f"{b // m}{unit}"
    return str(b)


def print_collectives(console: Console, res: BenchResult) -> None:
    """One table per group, the p2p matrix and the findings."""
    from rich.table import Table

    groups = sorted({r.group for r in res.rows}, key=lambda g: (g != "world", g))
    for g in groups:
        t = Table(title=f"{g} ({res.backend})")
        for col in ("op", "size", "ranks", "time ms", "algbw GB/s", "busbw GB/s", "per-rank ms"):
            t.add_column(col, justify="right")
        for r in sorted((r for r in res.rows if r.group == g), key=lambda r: (r.op, r.size_bytes)):
            per = " ".join(f"{k}:{v * 1e3:.3f}" for k, v in sorted(r.rank_time_s.items()))
            late = f" (late: {r.late_rank})" if r.late_rank is not None else ""
            t.add_row(
                r.op,
                _size(r.size_bytes),
                str(r.n_ranks),
                f"{r.time_s * 1e3:.3f}",
                f"{r.algbw_bytes_s / 1e9:.3f}",
                f"{r.busbw_bytes_s / 1e9:.3f}",
                per + late,
            )
        console.print(t)
    m = res.p2p_bw_bytes_s
    if any(any(v > 0 for v in row) for row in m):
        pt = Table(title=f"point-to-point GB/s ({_size(res.p2p_bytes)} messages; row sends)")
        pt.add_column("")
        for j in range(len(m)):
            pt.add_column(str(j), justify="right")
        for i, row in enumerate(m):
            pt.add_row(str(i), *("-" if i == j else f"{v / 1e9:.3f}" for j, v in enumerate(row)))
        console.print(pt)
    for f in res.findings:
        console.print(f"[bold]{f['check']}[/]: {f['message']}\n  fix: {f['fix']}")
