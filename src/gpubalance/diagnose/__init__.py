"""Diagnose multi-rank jobs: per-rank phase tracer, trace readers, analyzer, launch audit,
collective benchmark and NVML telemetry (layer 3)."""

from gpubalance.diagnose.analyzer import AnalysisOptions, Diagnosis, analyze, detect_stragglers
from gpubalance.diagnose.audit import AuditFinding, AuditReport, audit
from gpubalance.diagnose.audit_facts import RankFacts, collect_facts
from gpubalance.diagnose.audit_run import run_audit
from gpubalance.diagnose.bandwidth import bus_factor, busbw_bytes_s
from gpubalance.diagnose.collbench import BenchConfig, BenchResult, run_collectives
from gpubalance.diagnose.findings import Finding
from gpubalance.diagnose.kineto import read_kineto_rank
from gpubalance.diagnose.load import load_traces
from gpubalance.diagnose.model import RankTrace, TraceSet
from gpubalance.diagnose.nvml import Nvml, NvmlSampler, NvmlUnavailable
from gpubalance.diagnose.reader import read_tracer_file, read_tracer_rank
from gpubalance.diagnose.tracer import PhaseTracer

__all__ = [
    "AnalysisOptions",
    "AuditFinding",
    "AuditReport",
    "BenchConfig",
    "BenchResult",
    "Diagnosis",
    "Finding",
    "Nvml",
    "NvmlSampler",
    "NvmlUnavailable",
    "PhaseTracer",
    "RankFacts",
    "RankTrace",
    "TraceSet",
    "analyze",
    "audit",
    "bus_factor",
    "busbw_bytes_s",
    "collect_facts",
    "detect_stragglers",
    "load_traces",
    "read_kineto_rank",
    "read_tracer_file",
    "read_tracer_rank",
    "run_audit",
    "run_collectives",
]
