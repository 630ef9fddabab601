"""Rendering of a calibration: Rich table of the fitted profile, fit error and checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import RenderableType

    from gpubalance.calibrate.result import Calibration

__all__ = ["calibration_renderables"]


def _num(v: object) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def calibration_renderables(cal: Calibration) -> list[RenderableType]:
    """Tables for the console: profile values, fit quality, per-run checks, notes."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    out: list[RenderableType] = []
    t = Table(title=f"calibrated {cal.kind} profile", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("field")
    t.add_column("value", justify="right")
    for k, v in cal.profile.model_dump().items():
        t.add_row(k, _num(v))
    for k, v in cal.extra.items():
        t.add_row(f"{k} (not in profile)", _num(v))
    out.append(t)
    out.append(
        Text(
            f"fit on {cal.used} of {cal.total} requests ({cal.target}): "
            f"R² {cal.fit.r2:.4f}, MAPE {cal.fit.mape:.1%}"
        )
    )
    if cal.checks:
        c = Table(title="replayed runs: e2e ms", box=box.SIMPLE_HEAD, title_justify="left")
        for col in ("run", "n", "p50 meas", "p50 pred", "p95 meas", "p95 pred"):
            c.add_column(col, justify="left" if col == "run" else "right")
        for row in cal.checks:
            c.add_row(
                str(row["run"]),
                str(row["n"]),
                f"{float(row['measured_p50_s']) * 1e3:.1f}",
                f"{float(row['predicted_p50_s']) * 1e3:.1f}",
                f"{float(row['measured_p95_s']) * 1e3:.1f}",
                f"{float(row['predicted_p95_s']) * 1e3:.1f}",
            )
        out.append(c)
    for note in cal.notes:
        out.append(Text(f"note: {note}", style="dim"))
    return out
