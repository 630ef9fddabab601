"""Fit the roofline model's efficiency factors (:class:`RooflineEfficiency`) to measurements.

For a known GPU and model, the roofline prices a request served alone
(:meth:`RooflineModel.cost_s`) and its first token (one prefill iteration). The fit finds
``compute_efficiency``, ``bandwidth_efficiency`` and the per-iteration ``overhead_s`` that
minimise the relative error of predicted end-to-end latency (and TTFT, where measured) over
requests that ran alone, by bounded non-linear least squares (scipy ``least_squares``,
efficiencies in log space). ``comm_efficiency`` is kept (it only matters for tp > 1 and is
not separable from compute on one replica's timings).

Identifiability: prefill-heavy requests pin the compute efficiency, long decodes the
bandwidth efficiency, and short requests the overhead; a workload with one fixed shape
cannot separate them (the fit then reports a large condition number in the notes).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares

from gpubalance.calibrate.measurements import Measurements, select_isolated
from gpubalance.calibrate.result import Calibration, fit_quality
from gpubalance.cost.roofline import RooflineEfficiency, RooflineModel
from gpubalance.errors import UserInputError
from gpubalance.hardware.gpus import load_gpu_catalog
from gpubalance.hardware.models import resolve_model

__all__ = ["fit_roofline"]


def fit_roofline(
    m: Measurements,
    *,
    gpu: str,
    model: str,
    precision: str = "bf16",
    tp: int = 1,
    isolated_only: bool = True,
    min_isolated: int = 20,
    start: RooflineEfficiency | None = None,
) -> Calibration:
    """Fit :class:`RooflineEfficiency` for ``model`` on ``tp`` x ``gpu`` (catalog names)."""
    gpu_spec = load_gpu_catalog(None).get(gpu)
    model_spec = resolve_model(model, None)
    sel: Measurements = m
    notes: list[str] = []
    if isolated_only:
        sel, notes = select_isolated(
            m,
            min_isolated,
            otherwise="queueing is counted as slowness, so efficiencies come out low",
        )
    if len(sel) < 3:
        raise UserInputError(f"need at least 3 successful requests to fit, got {len(sel)}")
    base = start or RooflineEfficiency()
    inp, out = sel.input_tokens, sel.output_tokens
    e2e = sel.e2e_s
    has_ttft = np.isfinite(sel.ttft_s) & (sel.ttft_s > 0) & (out > 1)
    ones = np.ones_like(out)

    def build(x: np.ndarray) -> RooflineModel:
        eff = RooflineEfficiency(
            compute_efficiency=float(min(math.exp(x[0]), 1.5)),
            bandwidth_efficiency=float(min(math.exp(x[1]), 1.5)),
            comm_efficiency=base.comm_efficiency,
            overhead_s=float(max(x[2], 0.0)),
        )
        return RooflineModel(gpu_spec, model_spec, precision, tp, eff, require_fit=False)

    def residuals(x: np.ndarray) -> np.ndarray:
        rm = build(x)
        r = rm.costs_s(inp, out) / np.maximum(e2e, 1e-9) - 1.0
        if has_ttft.any():
            t1 = rm.costs_s(inp[has_ttft], ones[has_ttft])
            r = np.concatenate([r, t1 / sel.ttft_s[has_ttft] - 1.0])
        return r

    x0 = np.array(
        [math.log(base.compute_efficiency), math.log(base.bandwidth_efficiency), base.overhead_s]
    )
    lo = np.array([math.log(0.005), math.log(0.005), 0.0])
    hi = np.array([math.log(1.5), math.log(1.5), max(1.0, float(np.max(e2e)))])
    sol = least_squares(residuals, x0, bounds=(lo, hi), x_scale=[1.0, 1.0, 1e-3], loss="linear")
    rm = build(sol.x)
    jac = sol.jac
    try:
        cond = float(np.linalg.cond(jac))
    except np.linalg.LinAlgError:
        cond = math.inf
    if not math.isfinite(cond) or cond > 1e8:
        notes.append(
            "the measurements do not separate compute, bandwidth and overhead well "
            f"(condition number {cond:.2g}); vary prompt and answer lengths"
        )
    report = fit_quality(rm.costs_s(inp, out), e2e)
    return Calibration(
        kind="roofline",
        profile=rm.efficiency,
        fit=report,
        used=len(sel),
        total=len(m),
        target="e2e_s" + (" + ttft_s" if has_ttft.any() else ""),
        notes=notes,
    )
