"""Calibration (layer 3): fit cost/performance models to what was measured.

Reads load-test results and JSON access logs (:func:`load_measurements`) and fits the
token cost model (:func:`fit_token`), the roofline efficiency factors
(:func:`fit_roofline`) or an iteration/batch time model by replaying the measured runs
through the simulator (:func:`fit_step`). Each returns a :class:`Calibration` holding a
profile that the rest of gpubalance loads (``TokenCostModel.load``,
``RooflineEfficiency.load``, ``LinearStepTime`` YAML for ``emulate``), its fit error and
notes on what was used.
"""

from gpubalance.calibrate.measurements import Measurements, isolated_mask, load_measurements
from gpubalance.calibrate.result import Calibration, fit_quality
from gpubalance.calibrate.roofline_fit import fit_roofline
from gpubalance.calibrate.step_fit import BatchLimits, fit_step, predict_e2e_s
from gpubalance.calibrate.token_fit import fit_token

__all__ = [
    "BatchLimits",
    "Calibration",
    "Measurements",
    "fit_quality",
    "fit_roofline",
    "fit_step",
    "fit_token",
    "isolated_mask",
    "load_measurements",
    "predict_e2e_s",
]
