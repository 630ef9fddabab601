"""Deployment planning (layer 3): candidate shapes, SLA search, cost, failure domains.

:func:`make_plan` sizes every GPU type x GPUs per node x tensor-parallel shape so it meets
a latency SLA today and after growth, prices it, sizes its failure domain and recommends
one. The performance answers come from a :class:`PlanBackend`; the simulator-backed one
is :class:`SimBackend`. :func:`run_plan` goes from a :class:`PlanRequest` (what
``gpubalance plan`` validates its flags into) to a :class:`PlanResult`.
"""

from gpubalance.plan.backend import LatencySamples, PlanBackend, ReplicaFit
from gpubalance.plan.config import DEFAULT_MODEL, DEFAULT_RATE_RPS, PlanRequest
from gpubalance.plan.entry import load_workload, run_plan
from gpubalance.plan.failure import FailureDomain, failure_domain, nodes_needed
from gpubalance.plan.planner import PlanSettings, growth_factor, make_plan
from gpubalance.plan.pricing import (
    HOURS_PER_MONTH,
    FleetCost,
    PriceBook,
    fleet_cost,
    load_price_file,
)
from gpubalance.plan.result import Candidate, PlanInputsSummary, PlanResult, PlanStats
from gpubalance.plan.search import SearchOutcome, smallest_passing
from gpubalance.plan.shapes import NODE_SIZES, GpuOffer, Shape, enumerate_shapes
from gpubalance.plan.sim_backend import SimBackend
from gpubalance.plan.sla import DEFAULT_SLA, LatencySummary, Sla

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_RATE_RPS",
    "DEFAULT_SLA",
    "HOURS_PER_MONTH",
    "NODE_SIZES",
    "Candidate",
    "FailureDomain",
    "FleetCost",
    "GpuOffer",
    "LatencySamples",
    "LatencySummary",
    "PlanBackend",
    "PlanInputsSummary",
    "PlanRequest",
    "PlanResult",
    "PlanSettings",
    "PlanStats",
    "PriceBook",
    "ReplicaFit",
    "SearchOutcome",
    "Shape",
    "SimBackend",
    "Sla",
    "enumerate_shapes",
    "failure_domain",
    "fleet_cost",
    "growth_factor",
    "load_price_file",
    "load_workload",
    "make_plan",
    "nodes_needed",
    "run_plan",
    "smallest_passing",
]
