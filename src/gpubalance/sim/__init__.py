"""Serving simulator (layer 2): discrete-event loop, the replica model (continuous batching
with KV capacity, shared with the emulator), and a fleet of replicas behind a shared
routing policy. Entry point: :func:`simulate`.
"""

from gpubalance.sim.fleet import EarlyStop, ReplicaSpec, SimResult, StandaloneCost, simulate
from gpubalance.sim.loop import EventLoop
from gpubalance.sim.metrics import SLA, Goodput, LatencyStats, goodput, latency_stats
from gpubalance.sim.replica import Replica, RequestTooLarge, SeqState, StepResult
from gpubalance.sim.source import as_request_arrays, generate_arrays, scale_arrivals
from gpubalance.sim.step import LinearStepTime, StepTimeModel

__all__ = [
    "SLA",
    "EarlyStop",
    "EventLoop",
    "Goodput",
    "LatencyStats",
    "LinearStepTime",
    "Replica",
    "ReplicaSpec",
    "RequestTooLarge",
    "SeqState",
    "SimResult",
    "StandaloneCost",
    "StepResult",
    "StepTimeModel",
    "as_request_arrays",
    "generate_arrays",
    "goodput",
    "latency_stats",
    "scale_arrivals",
    "simulate",
]
