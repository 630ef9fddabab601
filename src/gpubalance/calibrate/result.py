"""What a calibration produces: a profile, its fit error, and how it was obtained."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel

from gpubalance.cost.token import FitReport

__all__ = ["Calibration", "fit_quality"]


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


@dataclass(slots=True)
class Calibration:
    """A fitted profile (a pydantic model with ``save``/``load`` or a plain dump).

    ``kind``: ``token``, ``roofline`` or ``step``; ``fit``: error on the requests used;
    ``used``/``total``: requests used of those read; ``target``: what was fitted
    (``e2e_s`` or ``ttft_s``); ``extra``: fitted values that are not part of the profile
    (e.g. the per-request network overhead of a step fit), with units in their names;
    ``checks``: per-run predicted vs measured percentiles (step fits); ``slowdowns``:
    measured service-time factors of requests that ran alone, median 1 (step fits with
    jitter; see :class:`~gpubalance.calibrate.step_fit.JitteredStepTime`).
    """

    kind: str
    profile: BaseModel
    fit: FitReport
    used: int
    total: int
    target: str
    notes: list[str] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    slowdowns: np.ndarray | None = None

    def save_profile(self, path: str | Path) -> Path:
        """Write the profile as YAML (or JSON for other suffixes), temp file + rename.

        The file loads with the profile's own class (``TokenCostModel.load``,
        ``RooflineEfficiency.load``, ``config.load_model(LinearStepTime, path)``).
        """
        p = Path(path)
        data = self.profile.model_dump()
        if p.suffix.lower() in {".yaml", ".yml"}:
            text = yaml.safe_dump(data, sort_keys=False)
        else:
            import json

            text = json.dumps(data, indent=2) + "\n"
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)
        return p

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "kind": self.kind,
            "profile": self.profile.model_dump(),
            "fit": {"r2": self.fit.r2, "mape": self.fit.mape, "n": self.fit.n},
            "used": self.used,
            "total": self.total,
            "target": self.target,
            "notes": list(self.notes),
            "extra": dict(self.extra),
            "checks": list(self.checks),
            "slowdowns": None if self.slowdowns is None else self.slowdowns.tolist(),
        }
