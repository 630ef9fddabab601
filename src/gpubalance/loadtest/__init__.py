"""Async load generator for OpenAI-compatible endpoints and its latency statistics (layer 3).

Open-loop shapes (constant, Poisson, gamma, trace replay) send on schedule whatever the
server does; closed-loop concurrency keeps N requests in flight. Records every request
(TTFT, inter-token gaps, end-to-end, tokens, error kind), summarises percentiles and
throughput, and searches the highest rate that meets an SLA.
"""

from gpubalance.loadtest.config import LoadTestConfig
from gpubalance.loadtest.endpoint import Endpoint, endpoint_url
from gpubalance.loadtest.execute import run_loadtest
from gpubalance.loadtest.goodput import GoodputResult, Sla, SlaTarget, parse_sla, search_goodput
from gpubalance.loadtest.prompts import synth_prompt
from gpubalance.loadtest.records import ERROR_KINDS, RequestRecord, RequestSpec
from gpubalance.loadtest.results import LoadTestResult, RunResult
from gpubalance.loadtest.runner import run_async, run_closed_loop, run_open_loop
from gpubalance.loadtest.schedule import TokenSpec, open_loop_schedule, trace_schedule
from gpubalance.loadtest.stats import Percentiles, RunSummary, percentiles, summarize

__all__ = [
    "ERROR_KINDS",
    "Endpoint",
    "GoodputResult",
    "LoadTestConfig",
    "LoadTestResult",
    "Percentiles",
    "RequestRecord",
    "RequestSpec",
    "RunResult",
    "RunSummary",
    "Sla",
    "SlaTarget",
    "TokenSpec",
    "endpoint_url",
    "open_loop_schedule",
    "parse_sla",
    "percentiles",
    "run_async",
    "run_closed_loop",
    "run_loadtest",
    "run_open_loop",
    "search_goodput",
    "summarize",
    "synth_prompt",
    "trace_schedule",
]
