"""Prometheus metrics of the gateway (prometheus-client, a registry per gateway).

Hot-path metrics (latency, TTFT, counts) use label children cached in dicts; per-backend
gauges (in-flight requests and cost, health, scraped queue and KV usage, pool queue depth)
are read from the live routing state only when /metrics is scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["GatewayMetrics"]

LATENCY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)


class _StateCollector(Collector):
    def __init__(self, runtime: Callable[[], Any]) -> None:
        self._runtime = runtime

    def collect(self) -> Iterator[GaugeMetricFamily]:
        rt = self._runtime()
        if rt is None:
            return
        lb = ["pool", "backend"]
        inflight = GaugeMetricFamily(
            "gpubalance_backend_in_flight_requests", "Requests in flight per backend.", labels=lb
        )
        cost = GaugeMetricFamily(
            "gpubalance_backend_in_flight_cost_seconds",
            "Predicted routing cost (s; marginal on a busy replica for roofline pools) of "
            "requests in flight per backend.",
            labels=lb,
        )
        healthy = GaugeMetricFamily(
            "gpubalance_backend_healthy", "1 when the backend takes traffic.", labels=lb
        )
        draining = GaugeMetricFamily(
            "gpubalance_backend_draining", "1 when an operator drains it.", labels=lb
        )
        weight = GaugeMetricFamily("gpubalance_backend_weight", "Routing weight.", labels=lb)
        waiting = GaugeMetricFamily(
            "gpubalance_backend_waiting_requests",
            "Requests the backend reports waiting (scraped).",
            labels=lb,
        )
        kv = GaugeMetricFamily(
            "gpubalance_backend_kv_cache_usage", "KV-cache usage 0..1 (scraped).", labels=lb
        )
        queue = GaugeMetricFamily(
            "gpubalance_pool_queue_depth", "Requests outstanding in the pool.", labels=["pool"]
        )
        pcost = GaugeMetricFamily(
            "gpubalance_pool_in_flight_cost_seconds",
            "Predicted cost (s) outstanding in the pool.",
            labels=["pool"],
        )
        for pool in rt.pools.values():
            queue.add_metric([pool.name], pool.admission.queued)
            pcost.add_metric([pool.name], pool.admission.in_flight_cost_s)
            for b in pool.backends:
                s = b.state
                lv = [pool.name, b.name]
                inflight.add_metric(lv, s.in_flight)
                cost.add_metric(lv, s.in_flight_cost_s)
                healthy.add_metric(lv, 1.0 if s.healthy else 0.0)
                draining.add_metric(lv, 1.0 if s.draining else 0.0)
                weight.add_metric(lv, s.weight)
                waiting.add_metric(lv, s.waiting)
                kv.add_metric(lv, s.kv_usage)
        yield from (inflight, cost, healthy, draining, weight, waiting, kv, queue, pcost)


class GatewayMetrics:
    """All gateway metrics in one private registry."""

    def __init__(self, runtime: Callable[[], Any] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.latency = Histogram(
            "gpubalance_request_duration_seconds",
            "End-to-end request latency through the gateway.",
            ["endpoint", "backend"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.ttft = Histogram(
            "gpubalance_time_to_first_token_seconds",
            "Time to the first response byte (first token for streams).",
            ["endpoint", "backend"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.requests = Counter(
            "gpubalance_requests",
            "Requests by endpoint and status.",
            ["endpoint", "status"],
            registry=r,
        )
        self.errors = Counter("gpubalance_errors", "Errors by kind.", ["kind"], registry=r)
        self.cache = Counter(
            "gpubalance_cache_lookups",
            "Response-cache lookups by endpoint and result (hit/miss).",
            ["endpoint", "result"],
            registry=r,
        )
        self.batch_inputs = Histogram(
            "gpubalance_embedding_batch_inputs",
            "Inputs per upstream embedding batch.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.retries = Counter(
            "gpubalance_retries", "Requests retried on another backend.", ["pool"], registry=r
        )
        if runtime is not None:
            r.register(_StateCollector(runtime))
        self._lat: dict[tuple[str, str], Any] = {}
        self._ttft: dict[tuple[str, str], Any] = {}
        self._req: dict[tuple[str, int], Any] = {}
        self._err: dict[str, Any] = {}
        self._cache: dict[tuple[str, str], Any] = {}

    def observe(
        self, endpoint: str, backend: str, status: int, latency_s: float, ttft_s: float | None
    ) -> None:
        """Record one finished request."""
        key = (endpoint, backend)
        child = self._lat.get(key)
        if child is None:
            child = self._lat[key] = self.latency.labels(endpoint, backend)
        child.observe(latency_s)
        if ttft_s is not None:
            t = self._ttft.get(key)
            if t is None:
                t = self._ttft[key] = self.ttft.labels(endpoint, backend)
            t.observe(ttft_s)
        rk = (endpoint, status)
        c = self._req.get(rk)
        if c is None:
            c = self._req[rk] = self.requests.labels(endpoint, str(status))
        c.inc()

    def error(self, kind: str) -> None:
        """Count one error of ``kind`` (connect, timeout, upstream_5xx, bad_request, ...)."""
        c = self._err.get(kind)
        if c is None:
            c = self._err[kind] = self.errors.labels(kind)
        c.inc()

    def cache_lookup(self, endpoint: str, hit: bool) -> None:
        key = (endpoint, "hit" if hit else "miss")
        c = self._cache.get(key)
        if c is None:
            c = self._cache[key] = self.cache.labels(*key)
        c.inc()

    def render(self) -> bytes:
        """Prometheus text exposition."""
        return generate_latest(self.registry)
