"""Rendering of a launch audit (Rich tables); JSON is ``AuditReport.to_dict()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from gpubalance.diagnose.audit import AuditReport

__all__ = ["print_audit"]


def print_audit(console: Console, report: AuditReport) -> None:
    """Per-rank placement table, nodes, path matrices and the findings with fixes."""
    from rich.table import Table

    from gpubalance.diagnose.topology import format_cpulist

    t = Table(title=f"{report.n_ranks} rank(s) of world {report.world_size}")
    for col in ("rank", "host", "local", "GPU", "NUMA", "GPU CPUs", "affinity", "mems", "policy"):
        t.add_column(col)
    for f in report.facts:
        t.add_row(
            str(f.rank),
            f.host,
            str(f.local_rank),
            f.device_bdf or f.device_uuid or "-",
            "-" if f.device_numa is None else str(f.device_numa),
            format_cpulist(f.device_local_cpus) or "-",
            format_cpulist(f.cpu_affinity),
            format_cpulist(f.mems_allowed) or "-",
            f.memory_policy,
        )
    console.print(t)
    console.print(
        "nodes: "
        + "; ".join(f"{h}: ranks {','.join(map(str, r))}" for h, r in report.nodes.items())
    )
    shown: set[str] = set()
    for f in report.facts:
        if f.path_matrix and f.host not in shown:
            shown.add(f.host)
            m = Table(title=f"GPU paths on {f.host}")
            m.add_column("")
            for j in range(len(f.path_matrix)):
                m.add_column(f"GPU{j}")
            for i, row in enumerate(f.path_matrix):
                m.add_row(f"GPU{i}", *row)
            console.print(m)
    notes = sorted({n for f in report.facts for n in f.notes})
    for n in notes:
        console.print(f"[dim]note: {n}[/]", highlight=False)
    if report.ok:
        console.print("[green]audit: no mismatch found[/]")
        return
    ft = Table(title="Audit findings", show_lines=True)
    for col in ("severity", "check", "ranks", "finding", "fix"):
        ft.add_column(col, overflow="fold")
    for a in report.findings:
        color = "red" if a.severity == "error" else "yellow"
        ft.add_row(
            f"[{color}]{a.severity}[/]",
            a.check,
            ",".join(map(str, a.ranks)) or "-",
            a.message,
            a.fix,
        )
    console.print(ft)
