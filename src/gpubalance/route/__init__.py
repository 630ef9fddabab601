"""Routing policies as pure objects over backend state (layer 2).

Shared by the gateway (real requests) and the simulator (simulated requests): both keep a
list of :class:`BackendState` and call ``policy.choose(backends, cost_s)``.
"""

from gpubalance.route import least_load, power_of_two, round_robin, weighted  # registers
from gpubalance.route.admission import Admission, AdmissionCaps
from gpubalance.route.base import POLICIES, RoutingPolicy, make_policy
from gpubalance.route.least_load import LeastCost, LeastRequests
from gpubalance.route.power_of_two import PowerOfTwo
from gpubalance.route.round_robin import RoundRobin
from gpubalance.route.rules import PoolRule, PoolRules
from gpubalance.route.state import BackendState, NoBackendAvailable
from gpubalance.route.weighted import Weighted

del least_load, power_of_two, round_robin, weighted

__all__ = [
    "POLICIES",
    "Admission",
    "AdmissionCaps",
    "BackendState",
    "LeastCost",
    "LeastRequests",
    "NoBackendAvailable",
    "PoolRule",
    "PoolRules",
    "PowerOfTwo",
    "RoundRobin",
    "RoutingPolicy",
    "Weighted",
    "make_policy",
]
