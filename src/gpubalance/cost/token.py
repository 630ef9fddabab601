"""Token-based cost model, fitted from measurements by non-negative least squares.

    cost_s = overhead_s
           + prefill_s_per_token   * input_tokens
           + prefill_s_per_token2  * input_tokens**2        (attention: quadratic in context)
           + decode_s_per_token    * output_tokens

All coefficients are >= 0, in seconds (per token, or per token squared). Fitting uses
``scipy.optimize.nnls`` on (request, measured duration) pairs and reports R² and MAPE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.optimize import nnls

from gpubalance.config import load_model, save_model
from gpubalance.errors import UserInputError

__all__ = ["FitReport", "TokenCostModel", "fit_quality", "fit_token_cost_model"]


class TokenCostModel(BaseModel):
    """Cost in seconds = overhead + linear prefill + quadratic prefill + per-token decode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(default="token", description="Discriminator for cost profile files.")
    overhead_s: float = Field(default=0.0, ge=0, description="Fixed cost per request, seconds.")
    prefill_s_per_token: float = Field(
        default=0.0, ge=0, description="Prefill seconds per input token."
    )
    prefill_s_per_token2: float = Field(
        default=0.0, ge=0, description="Attention prefill seconds per input token squared."
    )
    decode_s_per_token: float = Field(
        default=0.0, ge=0, description="Decode seconds per output token."
    )

    def cost_s(self, input_tokens: int, output_tokens: int) -> float:
        """Predicted cost of one request, seconds."""
        i = float(input_tokens)
        return (
            self.overhead_s
            + self.prefill_s_per_token * i
            + self.prefill_s_per_token2 * i * i
            + self.decode_s_per_token * float(output_tokens)
        )

    def costs_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`cost_s` (float64 seconds)."""
        i = np.asarray(input_tokens, dtype=np.float64)
        o = np.asarray(output_tokens, dtype=np.float64)
        return (
            self.overhead_s
            + i * (self.prefill_s_per_token + self.prefill_s_per_token2 * i)
            + self.decode_s_per_token * o
        )

    def save(self, path: str | Path) -> None:
        """Write as YAML (``.yaml``/``.yml``) or JSON (anything else), atomically."""
        save_model(self, path)

    @classmethod
    def load(cls, path: str | Path) -> TokenCostModel:
        """Read a YAML or JSON file written by :meth:`save` (or by hand)."""
        return load_model(cls, path)


@dataclass(frozen=True, slots=True)
class FitReport:
    """Quality of a cost-model fit on the pairs it was fitted to.

    r2: coefficient of determination (1 is perfect); mape: mean absolute percentage error
    as a fraction (0.05 = 5%), over samples with a positive measured duration; n: samples.
    """

    r2: float
    mape: float
    n: int


def fit_quality(predicted: np.ndarray, measured: np.ndarray) -> FitReport:
    """R² and MAPE (fraction) of ``predicted`` against ``measured`` seconds."""
    predicted = np.asarray(predicted, dtype=np.float64)
    measured = np.asarray(measured, dtype=np.float64)
    resid = measured - predicted
    ss_tot = float(((measured - measured.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    pos = measured > 0
    mape = float(np.mean(np.abs(resid[pos]) / measured[pos])) if pos.any() else float("nan")
    return FitReport(r2=r2, mape=mape, n=int(measured.shape[0]))


def fit_token_cost_model(
    input_tokens: Sequence[int] | np.ndarray,
    output_tokens: Sequence[int] | np.ndarray,
    durations_s: Sequence[float] | np.ndarray,
    *,
    quadratic: bool = True,
    relative: bool = False,
) -> tuple[TokenCostModel, FitReport]:
    """Fit a :class:`TokenCostModel` to measured durations (seconds) by NNLS.

    Columns are scaled to unit norm before solving, so coefficients of very different
    magnitude (seconds per token vs per token squared) are fitted equally well.

    Args:
        quadratic: include the input_tokens² term.
        relative: minimise relative rather than absolute error (rows weighted by 1/duration),
            which suits durations that span orders of magnitude.
    """
    inp = np.asarray(input_tokens, dtype=np.float64)
    out = np.asarray(output_tokens, dtype=np.float64)
    y = np.asarray(durations_s, dtype=np.float64)
    if not (inp.shape == out.shape == y.shape) or inp.ndim != 1:
        raise UserInputError("input_tokens, output_tokens and durations must be equal-length 1-D")
    if inp.shape[0] < 2:
        raise UserInputError(f"need at least 2 measurements to fit, got {inp.shape[0]}")
    if not np.all(np.isfinite(y)) or np.any(y < 0):
        raise UserInputError("measured durations must be finite and >= 0 seconds")
    cols = [np.ones_like(inp), inp, inp * inp if quadratic else np.zeros_like(inp), out]
    a = np.stack(cols, axis=1)
    if relative:
        w = 1.0 / np.maximum(y, np.max(y) * 1e-6 if np.max(y) > 0 else 1.0)
        a_w, y_w = a * w[:, None], y * w
    else:
        a_w, y_w = a, y
    norms = np.linalg.norm(a_w, axis=0)
    norms[norms == 0] = 1.0
    coef_scaled, _ = nnls(a_w / norms, y_w)
    coef = coef_scaled / norms
    model = TokenCostModel(
        overhead_s=float(coef[0]),
        prefill_s_per_token=float(coef[1]),
        prefill_s_per_token2=float(coef[2]),
        decode_s_per_token=float(coef[3]),
    )
    return model, fit_quality(model.costs_s(inp, out), y)
