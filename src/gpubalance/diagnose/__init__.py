"""Diagnose multi-rank jobs: per-rank phase tracer, trace readers, analyzer, launch audit,
collective benchmark and NVML telemetry (layer 3)."""

from gpubalance.diagnose.analyzer import AnalysisOptions, Diagnosis, analyze, detect_stragglers
from gpubalance.diagnose.findings import Finding
from gpubalance.diagnose.kineto import read_kineto_rank
from gpubalance.diagnose.load import load_traces
from gpubalance.diagnose.model import RankTrace, TraceSet
from gpubalance.diagnose.reader import read_tracer_file, read_tracer_rank
from gpubalance.diagnose.tracer import PhaseTracer

__all__ = [
    "AnalysisOptions",
    "Diagnosis",
    "Finding",
    "PhaseTracer",
    "RankTrace",
    "TraceSet",
    "analyze",
    "detect_stragglers",
    "load_traces",
    "read_kineto_rank",
    "read_tracer_file",
    "read_tracer_rank",
]
