"""gpubalance: keep GPU work balanced and GPU fleets right-sized for AI inference.

The public API is re-exported here; subpackages follow the layers of ARCHITECTURE.md
(workload/hardware -> cost -> balance/route/sim -> plan/gateway/emulate/loadtest/diagnose
-> report/cli). Heavy optional dependencies (torch) are imported only where used.
"""

from gpubalance.cost import (
    CallableCost,
    CostModel,
    FitReport,
    TokenCostModel,
    as_cost_model,
    fit_token_cost_model,
)
from gpubalance.errors import UserInputError
from gpubalance.workload import (
    Request,
    WorkloadProfile,
    default_profile,
    default_workload,
    generate_workload,
    load_trace,
    profile_from_requests,
)

__version__ = "0.1.0"

__all__ = [
    "CallableCost",
    "CostModel",
    "FitReport",
    "Request",
    "TokenCostModel",
    "UserInputError",
    "WorkloadProfile",
    "__version__",
    "as_cost_model",
    "default_profile",
    "default_workload",
    "fit_token_cost_model",
    "generate_workload",
    "load_trace",
    "profile_from_requests",
]
