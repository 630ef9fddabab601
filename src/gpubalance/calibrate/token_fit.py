"""Fit the token cost model (:class:`~gpubalance.cost.TokenCostModel`) to measurements.

The token model prices a request served alone, so by default only requests that had the
server to themselves are used (:func:`isolated_mask`); queueing behind other requests would
otherwise be fitted as cost. When fewer than ``min_isolated`` such requests exist (busy
runs, or logs without send times) all requests are used and a note says so.
"""

from __future__ import annotations

from gpubalance.calibrate.measurements import Measurements, select_isolated
from gpubalance.calibrate.result import Calibration
from gpubalance.cost.token import fit_token_cost_model
from gpubalance.errors import UserInputError

__all__ = ["fit_token"]


def fit_token(
    m: Measurements,
    *,
    isolated_only: bool = True,
    min_isolated: int = 20,
    quadratic: bool = True,
    relative: bool = True,
) -> Calibration:
    """Fit a TokenCostModel to end-to-end latencies (seconds) by NNLS."""
    sel: Measurements = m
    notes: list[str] = []
    if isolated_only:
        sel, notes = select_isolated(
            m,
            min_isolated,
            otherwise="queueing delay is counted as cost, so the model is pessimistic",
        )
    if len(sel) < 2:
        raise UserInputError(f"need at least 2 successful requests to fit, got {len(sel)}")
    model, report = fit_token_cost_model(
        sel.input_tokens, sel.output_tokens, sel.e2e_s, quadratic=quadratic, relative=relative
    )
    return Calibration(
        kind="token", profile=model, fit=report, used=len(sel), total=len(m), target="e2e_s",
        notes=notes,
    )  # fmt: skip
