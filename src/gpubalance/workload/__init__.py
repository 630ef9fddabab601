"""Requests, trace loaders, workload profiles and seeded generators (layer 0)."""

from gpubalance.workload.generators import (
    default_workload,
    generate_arrivals,
    generate_lengths,
    generate_workload,
)
from gpubalance.workload.loaders import load_azure_csv, load_jsonl, load_trace
from gpubalance.workload.profile import (
    LengthDistribution,
    WorkloadProfile,
    default_profile,
    profile_from_requests,
)
from gpubalance.workload.request import Request, RequestArrays, to_arrays

__all__ = [
    "LengthDistribution",
    "Request",
    "RequestArrays",
    "WorkloadProfile",
    "default_profile",
    "default_workload",
    "generate_arrivals",
    "generate_lengths",
    "generate_workload",
    "load_azure_csv",
    "load_jsonl",
    "load_trace",
    "profile_from_requests",
    "to_arrays",
]
