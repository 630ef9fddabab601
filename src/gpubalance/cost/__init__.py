"""Cost models: what one unit of GPU work costs, in seconds (layer 1)."""

from gpubalance.cost.base import CallableCost, CostModel, as_cost_model
from gpubalance.cost.batched import BatchedCost
from gpubalance.cost.roofline import RooflineEfficiency, RooflineModel
from gpubalance.cost.token import FitReport, TokenCostModel, fit_token_cost_model

__all__ = [
    "BatchedCost",
    "CallableCost",
    "CostModel",
    "FitReport",
    "RooflineEfficiency",
    "RooflineModel",
    "TokenCostModel",
    "as_cost_model",
    "fit_token_cost_model",
]
