"""gpubalance: keep GPU work balanced and GPU fleets right-sized for AI inference.

The public API is listed here. Subpackages follow the layers of ARCHITECTURE.md
(workload/hardware -> cost -> balance/route/sim -> plan/gateway/emulate/loadtest/
calibrate/diagnose -> report/cli). Names from the higher layers are imported lazily on
first access (PEP 562), so ``import gpubalance`` stays cheap and never pulls in torch,
aiohttp or uvicorn.
"""

from __future__ import annotations

import importlib
from typing import Any

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

#: public name -> module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    # hardware and performance model
    "GpuSpec": "gpubalance.hardware",
    "ModelSpec": "gpubalance.hardware",
    "estimate_memory": "gpubalance.hardware",
    "load_gpu_catalog": "gpubalance.hardware",
    "load_model_catalog": "gpubalance.hardware",
    "RooflineModel": "gpubalance.cost.roofline",
    "RooflineEfficiency": "gpubalance.cost.roofline",
    # balancing
    "BatchConstraint": "gpubalance.balance",
    "CostBalancedBatchSampler": "gpubalance.balance",
    "CostBalancedDistributedSampler": "gpubalance.balance",
    "StoreWorkQueue": "gpubalance.balance",
    "ThreadWorkQueue": "gpubalance.balance",
    "balance_metrics": "gpubalance.balance",
    "get_partitioner": "gpubalance.balance",
    # routing
    "BackendState": "gpubalance.route",
    "RoutingPolicy": "gpubalance.route",
    "make_policy": "gpubalance.route",
    # simulation and planning
    "SLA": "gpubalance.sim",
    "ReplicaSpec": "gpubalance.sim",
    "Replica": "gpubalance.sim",
    "simulate": "gpubalance.sim",
    "PlanRequest": "gpubalance.plan",
    "run_plan": "gpubalance.plan",
    # serving, measuring, calibrating
    "GatewayConfig": "gpubalance.gateway",
    "load_gateway_config": "gpubalance.gateway",
    "run_loadtest": "gpubalance.loadtest",
    "load_measurements": "gpubalance.calibrate",
    "fit_token": "gpubalance.calibrate",
    "fit_roofline": "gpubalance.calibrate",
    "fit_step": "gpubalance.calibrate",
    # diagnostics
    "PhaseTracer": "gpubalance.diagnose",
    "analyze": "gpubalance.diagnose",
    "load_traces": "gpubalance.diagnose",
    "run_audit": "gpubalance.diagnose",
    "run_collectives": "gpubalance.diagnose",
}

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
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpubalance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
