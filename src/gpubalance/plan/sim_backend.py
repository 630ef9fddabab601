"""The simulator-backed :class:`~gpubalance.plan.backend.PlanBackend`.

One backend = one model at one precision over one workload. For each (GPU, TP) it builds
the roofline model of a replica (:class:`gpubalance.cost.roofline.RooflineModel`, which
also carries the memory estimate) and simulates fleets of such replicas behind the shared
routing policy (:func:`gpubalance.sim.simulate`), replaying the same requests at any rate
by scaling arrival times, so every answer for one shape uses the same requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gpubalance.cost.batched import BatchedCost
from gpubalance.cost.roofline import RooflineEfficiency, RooflineModel
from gpubalance.hardware import GpuSpec, MemoryEstimate, ModelSpec
from gpubalance.plan.backend import LatencySamples, ReplicaFit
from gpubalance.plan.shapes import GpuOffer
from gpubalance.plan.sla import LatencySummary, Sla
from gpubalance.sim import SLA as SimSla
from gpubalance.sim import EarlyStop, ReplicaSpec, SimResult, simulate
from gpubalance.workload import RequestArrays

__all__ = ["SimBackend", "memory_one_line"]

_BIG_S = 1e18  # latency standing for "did not complete" in percentiles


def memory_one_line(est: MemoryEstimate) -> str:
    """The memory arithmetic of one replica on one line (GB = 10**9 bytes)."""
    gb = 1e9
    return (
        f"{est.model} at {est.precision} on {est.tp} x {est.gpu}: usable "
        f"{est.usable_bytes / gb:.1f} GB/GPU ({est.gpu_memory_bytes / gb:.1f} GB x "
        f"{est.gpu_memory_utilization:g}) - weights {est.weights_bytes_per_gpu / gb:.1f} GB "
        f"({est.weights_bytes_total / gb:.1f} GB in all) - activations "
        f"{est.activation_bytes_per_gpu / gb:.1f} GB - runtime "
        f"{est.runtime_overhead_bytes_per_gpu / gb:.1f} GB = KV budget "
        f"{est.kv_budget_bytes_per_gpu / gb:.1f} GB/GPU at "
        f"{est.kv_bytes_per_token / 1024:.0f} KiB per token: {est.reason}"
    )


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    v = np.where(np.isfinite(values), values, _BIG_S)
    if v.size == 0:
        return math.inf, math.inf
    p95, p99 = np.percentile(v, (95.0, 99.0))
    return (
        math.inf if p95 >= _BIG_S / 2 else float(p95),
        math.inf if p99 >= _BIG_S / 2 else float(p99),
    )


def summarise(res: SimResult) -> LatencySummary:
    """LatencySummary of a simulation; requests that did not complete count as infinitely
    late (so rejections and early stops raise the percentiles instead of hiding)."""
    t95, t99 = _percentiles(res.ttft_s)
    e95, e99 = _percentiles(res.e2e_s)
    busy = res.busy_fraction
    return LatencySummary(
        ttft_p95_s=t95,
        ttft_p99_s=t99,
        e2e_p95_s=e95,
        e2e_p99_s=e99,
        e2e_mean_s=res.e2e.mean_s,
        tpot_p99_s=res.tpot.p99_s,
        throughput_rps=res.throughput_rps,
        gpu_busy_fraction=float(busy.mean()) if busy.size else 0.0,
        requests=res.n_requests,
        completed=res.completed,
        stopped_early=res.stopped_early,
    )


@dataclass
class SimBackend:
    """Plan backend: roofline replicas simulated as fleets over one workload.

    Attributes:
        gpus: GPU types to consider (catalog specs).
        model: the model. precision: weight precision name.
        requests: the workload at ``base_rate_rps`` (arrival-sorted arrays); other rates
            replay it with arrival times scaled.
        base_rate_rps: arrival rate of ``requests``.
        efficiency: roofline efficiency factors (None: the roofline's defaults).
        policy: routing policy name (``gpubalance.route``).
        seed: seed of the policy's random choices.
    """

    gpus: Sequence[GpuSpec]
    model: ModelSpec
    precision: str
    requests: RequestArrays
    base_rate_rps: float
    efficiency: RooflineEfficiency | None = None
    policy: str = "least_cost"
    seed: int = 0
    _rooflines: dict[tuple[str, int], RooflineModel] = field(default_factory=dict, repr=False)
    _prices: dict[tuple[str, int], BatchedCost] = field(default_factory=dict, repr=False)

    def _spec(self, gpu: str) -> GpuSpec:
        for g in self.gpus:
            if g.name == gpu:
                return g
        raise KeyError(gpu)

    def context_tokens(self) -> int:
        """Longest request (input + output) of the workload, clipped to the model's context:
        the sequence length a replica must hold to count as fitting."""
        longest = int((self.requests.input_tokens + self.requests.output_tokens).max())
        return max(1, min(longest, self.model.max_context_tokens))

    def roofline(self, gpu: str, tp: int) -> RooflineModel:
        """The roofline model of one replica (memory estimate included)."""
        key = (gpu, tp)
        rm = self._rooflines.get(key)
        if rm is None:
            rm = RooflineModel(
                self._spec(gpu),
                self.model,
                self.precision,
                tp,
                self.efficiency,
                context_tokens=self.context_tokens(),
                require_fit=False,
            )
            self._rooflines[key] = rm
        return rm

    def routing_price(self, gpu: str, tp: int) -> BatchedCost:
        """The fleet's routing price for (``gpu``, ``tp``) replicas, the simulator's default
        (marginal cost on a busy replica), kept so its memo serves every simulation."""
        key = (gpu, tp)
        price = self._prices.get(key)
        if price is None:
            price = self._prices[key] = BatchedCost(self.roofline(gpu, tp))
        return price

    # ---- PlanBackend -------------------------------------------------------------------

    def offers(self) -> list[GpuOffer]:
        return [
            GpuOffer(
                name=g.name,
                memory_bytes=g.memory_bytes,
                max_gpus_per_node=g.max_gpus_per_node,
                price_gpu_hour_usd=g.price_per_gpu_hour_usd,
                price_source=f"{g.price_source} ({g.price_as_of})",
            )
            for g in self.gpus
        ]

    def fit(self, gpu: str, tp: int) -> ReplicaFit:
        est = self.roofline(gpu, tp).memory
        return ReplicaFit(
            gpu=gpu,
            tp=tp,
            fits=est.fits,
            explanation=memory_one_line(est),
            weights_per_gpu_bytes=int(est.weights_bytes_per_gpu),
            kv_capacity_tokens=int(est.kv_capacity_tokens),
        )

    def capacity_rps(self, gpu: str, tp: int) -> float:
        """Requests per second one replica could serve with unlimited batching: per request,
        its prompt prefilled in a huge batch (weights read once per 1,000 prompts, attention
        over half the causal square) plus its output tokens decoded in a huge batch. The
        simulator's capped batches, chunking and queueing only take longer."""
        rm = self.roofline(gpu, tp)
        k = 1000
        inp = self.requests.input_tokens
        out = self.requests.output_tokens
        sample = np.linspace(0, len(inp) - 1, num=min(len(inp), 400)).astype(np.int64)
        total = 0.0
        f = rm.iteration_time_s
        for j in sample.tolist():
            i = int(inp[j])
            o = int(out[j])
            if i > 0:
                total += f(i * k, 0.5 * float(i) * i * k, 0, 0) / k
            if o > 1:
                ctx = i + o // 2
                total += (o - 1) * f(0, 0.0, k, ctx * k) / k
        mean_s = total / len(sample)
        return 1.0 / mean_s if mean_s > 0 else math.inf

    def mean_tokens_per_request(self) -> float:
        return float(np.mean(self.requests.input_tokens + self.requests.output_tokens))

    def simulate_fleet(
        self, gpu: str, tp: int, replicas: int, rate_rps: float, sla: Sla | None, samples: int
    ) -> SimResult:
        """Simulate ``replicas`` replicas of (``gpu``, ``tp``) at ``rate_rps``; with ``sla``
        the run stops once more than 1 % (5 % for p95-only SLAs) of requests miss it;
        ``samples`` queue-depth samples are taken."""
        early = None
        if sla is not None:
            # stop once more than 1% (5%) of requests missed the p99 (p95) bounds
            if sla.ttft_p99_s is not None or sla.e2e_p99_s is not None:
                early = EarlyStop(SimSla(ttft_s=sla.ttft_p99_s, e2e_s=sla.e2e_p99_s, quantile=0.99))
            else:
                early = EarlyStop(SimSla(ttft_s=sla.ttft_p95_s, e2e_s=sla.e2e_p95_s, quantile=0.95))
        return simulate(
            self.requests,
            ReplicaSpec(self.roofline(gpu, tp)),
            n_replicas=replicas,
            policy=self.policy,
            seed=self.seed,
            rate_scale=rate_rps / self.base_rate_rps,
            cost_model=self.routing_price(gpu, tp),
            early_stop=early,
            max_samples=samples,
        )

    def evaluate(
        self, gpu: str, tp: int, replicas: int, rate_rps: float, sla: Sla | None
    ) -> LatencySummary:
        return summarise(self.simulate_fleet(gpu, tp, replicas, rate_rps, sla, 0))

    def samples(self, gpu: str, tp: int, replicas: int, rate_rps: float) -> LatencySamples:
        res = self.simulate_fleet(gpu, tp, replicas, rate_rps, None, 200)
        done = np.isfinite(res.e2e_s)
        return LatencySamples(
            ttft_s=res.ttft_s[done],
            e2e_s=res.e2e_s[done],
            replica_busy_fraction=res.busy_fraction,
            sample_s=res.sample_s,
            running=res.running.sum(axis=1) if res.running.size else np.zeros(0),
            waiting=res.waiting.sum(axis=1) if res.waiting.size else np.zeros(0),
        )
