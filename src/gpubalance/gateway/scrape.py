"""Parse vLLM-style Prometheus text from a backend's /metrics into routing signals.

Understood names (summed over label sets; KV usage is the maximum):
``vllm:num_requests_waiting``, ``vllm:num_requests_running``,
``vllm:gpu_cache_usage_perc`` and ``vllm:kv_cache_usage_perc`` (a 0..1 fraction, despite
the name).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BackendLoad", "parse_vllm_metrics"]


@dataclass(frozen=True, slots=True)
class BackendLoad:
    """Load a backend reports: queued and running requests, KV-cache usage fraction."""

    waiting: int
    running: int
    kv_usage: float


def parse_vllm_metrics(text: str) -> BackendLoad:
    """Read the vLLM gauges from Prometheus text exposition; absent ones read as 0."""
    waiting = running = 0.0
    kv = 0.0
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=-1)
        if name_end < 0:
            continue
        name = line[:name_end]
        rest = line[line.rindex("}") + 1 :] if "}" in line else line[name_end:]
        try:
            value = float(rest.split()[0])
        except (ValueError, IndexError):
            continue
        if name == "vllm:num_requests_waiting":
            waiting += value
        elif name == "vllm:num_requests_running":
            running += value
        elif name in ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"):
            kv = max(kv, value)
    return BackendLoad(round(waiting), round(running), kv)
