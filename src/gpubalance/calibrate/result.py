"""What a calibration produces: a profile, its fit error, and how it was obtained."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from gpubalance.config import save_model
from gpubalance.cost.token import FitReport, fit_quality

__all__ = ["Calibration", "fit_quality"]


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
        return save_model(self.profile, path)

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
