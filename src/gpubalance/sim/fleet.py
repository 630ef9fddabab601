"""Fleet simulation: a router (a shared :mod:`gpubalance.route` policy object over one
:class:`~gpubalance.route.BackendState` per replica) in front of N :class:`Replica` s, fed by
arrivals; :func:`simulate` is the public entry point.

How it runs (and why it is fast). The event loop (:mod:`gpubalance.sim.loop`) handles two
kinds of events: arrivals (merged from the sorted arrival times, never pushed on the heap)
and periodic queue-depth samples. Replicas are advanced *lazily*: between two arrivals a
replica's evolution depends only on its own contents, so when an event at time t needs the
fleet's state (to route a request, or to sample queues), each busy replica runs all its
iterations that start before t (:meth:`Replica.advance`, which collapses runs of identical
decode iterations). This gives exactly the result of a per-iteration event simulation in
which an arrival joins the replica's next iteration boundary at or after it.

Router bookkeeping mirrors the gateway: ``BackendState.start(cost_s)`` when a request is
routed, ``finish(cost_s)`` when its last token is emitted (finishes later than the current
event are held back until their time). ``cost_s`` is the request's predicted cost from a
:class:`~gpubalance.cost.CostModel`; by default :class:`~gpubalance.cost.BatchedCost` over the
first replica's step model: the seconds the request adds to a busy continuous-batching
replica (its prefill, plus each decode token's marginal share), the same routing price the
gateway uses for pools with a roofline cost model. Pass ``cost_model=StandaloneCost(step)``
(or the step model itself when it is a cost model) to route by standalone cost instead.

Admission: with ``max_queued_per_replica`` set, a request routed to a replica that already
has that many waiting is rejected (like a gateway answering 429). Requests whose prompt plus
output cannot fit a replica's KV cache are rejected as too large.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpubalance.cost import BatchedCost, CostModel
from gpubalance.route import BackendState, NoBackendAvailable, RoutingPolicy, make_policy
from gpubalance.sim.loop import EventLoop
from gpubalance.sim.metrics import SLA, Goodput, LatencyStats, goodput, latency_stats
from gpubalance.sim.replica import Replica, RequestTooLarge, SeqState
from gpubalance.sim.source import as_request_arrays, scale_arrivals
from gpubalance.sim.step import StepTimeModel
from gpubalance.workload import Request, RequestArrays

__all__ = ["EarlyStop", "ReplicaSpec", "SimResult", "StandaloneCost", "simulate"]

_ARRIVAL = 0
_SAMPLE = 1


@dataclass(frozen=True)
class ReplicaSpec:
    """How to build one replica (see :class:`Replica` for the meaning of each limit).

    Attributes:
        step_model: iteration time model (seconds).
        kv_capacity_tokens: KV capacity in tokens; None takes ``step_model.kv_capacity_tokens``.
        max_num_seqs: most sequences running at once.
        max_batched_tokens: token budget per iteration.
        chunked_prefill: split prompts across iterations.
        block_size_tokens: KV block size in tokens.
        weight: relative speed given to the router (load-aware policies divide by it).
        gpus: GPUs the replica occupies; None takes ``step_model.gpus`` or 1.
        name: backend name (default ``replica-<index>``).
    """

    step_model: StepTimeModel
    kv_capacity_tokens: int | None = None
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    chunked_prefill: bool = True
    block_size_tokens: int = 16
    weight: float = 1.0
    gpus: int | None = None
    name: str | None = None

    def build(self) -> Replica:
        """A fresh, empty replica."""
        kv = self.kv_capacity_tokens
        if kv is None:
            kv = getattr(self.step_model, "kv_capacity_tokens", None)
            if kv is None:
                raise ValueError("kv_capacity_tokens not given and step model has none")
        return Replica(
            self.step_model,
            int(kv),
            self.max_num_seqs,
            self.max_batched_tokens,
            chunked_prefill=self.chunked_prefill,
            block_size_tokens=self.block_size_tokens,
        )

    @property
    def gpu_count(self) -> int:
        """GPUs this replica occupies."""
        if self.gpus is not None:
            return int(self.gpus)
        return int(getattr(self.step_model, "gpus", 1) or 1)


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """Stop a simulation as soon as the outcome is certain to fail (for planner searches).

    Attributes:
        sla: stop once more requests missed a limit (or were rejected) than
            ``sla.allowed_violations(n_requests)``: the SLA quantile can no longer be met.
        max_waiting_per_replica: stop once a replica's waiting queue exceeds this many
            requests (a sign of overload).
    """

    sla: SLA | None = None
    max_waiting_per_replica: int | None = None


class StandaloneCost:
    """Cost model from any step model: seconds for one request run alone on the replica,
    i.e. one prefill iteration of the whole prompt plus ``output - 1`` decode iterations.

    The decode sum uses the trapezoid of the first and last decode iteration times, exact
    when the iteration time is affine in context tokens.
    """

    def __init__(self, step_model: StepTimeModel) -> None:
        self.step_model = step_model

    def cost_s(self, input_tokens: int, output_tokens: int) -> float:
        f = self.step_model.iteration_time_s
        i = max(int(input_tokens), 1)
        d = max(int(output_tokens) - 1, 0)
        c = f(i, float(i) * i, 0, 0)
        if d:
            c += d * 0.5 * (f(0, 0.0, 1, i + 1) + f(0, 0.0, 1, i + d))
        return float(c)

    def costs_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        cache: dict[tuple[int, int], float] = {}
        out = np.empty(len(input_tokens), dtype=np.float64)
        pairs = zip(
            np.asarray(input_tokens).tolist(), np.asarray(output_tokens).tolist(), strict=True
        )
        for k, (i, o) in enumerate(pairs):
            key = (i, o)
            v = cache.get(key)
            if v is None:
                v = cache[key] = self.cost_s(i, o)
            out[k] = v
        return out


def default_cost_model(step_model: StepTimeModel) -> CostModel:
    """The routing price of requests on replicas of ``step_model``: their marginal cost on a
    busy continuous-batching replica (:class:`~gpubalance.cost.BatchedCost`)."""
    return BatchedCost(step_model)


@dataclass
class SimResult:
    """Outcome of :func:`simulate`. Per-request arrays are in arrival order; latencies are
    seconds, NaN where a request did not complete (rejected, or cut by an early stop).

    See :mod:`gpubalance.sim.metrics` for the definitions of queue, TTFT, TPOT and e2e.
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    replica: np.ndarray  #: index of the replica served by, -1 if rejected / never routed
    queue_s: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    preemptions: np.ndarray  #: times each request was preempted
    rejected: int  #: refused by the admission cap or because no backend was eligible
    rejected_too_large: int  #: prompt + output cannot fit a replica's KV cache
    span_s: float  #: first arrival to last finish (or to the stop time)
    replica_busy_s: np.ndarray  #: seconds each replica spent in iterations
    replica_iterations: np.ndarray
    replica_preemptions: np.ndarray
    gpus: int  #: GPUs in the fleet
    sample_s: np.ndarray  #: queue-depth sample times
    waiting: np.ndarray  #: (samples, replicas) requests queued (not admitted) at each sample
    running: np.ndarray  #: (samples, replicas) requests admitted and unfinished at each sample
    #: (samples, replicas) KV blocks held / total near the sample time: as of the latest
    #: simulated iteration boundary (waiting and running are exact at the sample time)
    kv_usage: np.ndarray
    stopped_early: bool
    stop_reason: str
    wall_s: float  #: wall-clock seconds the simulation took
    sla: SLA | None = None
    ttft: LatencyStats = field(init=False)
    tpot: LatencyStats = field(init=False)
    e2e: LatencyStats = field(init=False)
    queue: LatencyStats = field(init=False)

    def __post_init__(self) -> None:
        self.ttft = latency_stats(self.ttft_s)
        self.tpot = latency_stats(self.tpot_s)
        self.e2e = latency_stats(self.e2e_s)
        self.queue = latency_stats(self.queue_s)

    @property
    def n_requests(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def completed(self) -> int:
        """Requests that finished."""
        return int(np.isfinite(self.e2e_s).sum())

    @property
    def throughput_rps(self) -> float:
        """Completed requests per second of the span."""
        return self.completed / self.span_s if self.span_s > 0 else math.nan

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens of completed requests per second of the span."""
        done = np.isfinite(self.e2e_s)
        tok = float(self.output_tokens[done].sum())
        return tok / self.span_s if self.span_s > 0 else math.nan

    @property
    def total_tokens_per_s(self) -> float:
        """Input plus output tokens of completed requests per second of the span."""
        done = np.isfinite(self.e2e_s)
        tok = float(self.output_tokens[done].sum() + self.input_tokens[done].sum())
        return tok / self.span_s if self.span_s > 0 else math.nan

    @property
    def throughput_rps_per_gpu(self) -> float:
        return self.throughput_rps / self.gpus

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    @property
    def busy_fraction(self) -> np.ndarray:
        """Per replica: fraction of the span its GPU(s) spent running iterations."""
        if self.span_s <= 0:
            return np.zeros_like(self.replica_busy_s)
        return self.replica_busy_s / self.span_s

    @property
    def total_preemptions(self) -> int:
        return int(self.replica_preemptions.sum())

    @property
    def goodput(self) -> Goodput | None:
        """Requests meeting ``sla`` (None without an SLA)."""
        if self.sla is None:
            return None
        return goodput(self.sla, self.ttft_s, self.e2e_s, self.tpot_s, self.span_s)

    def summary(self) -> dict[str, float | int | bool | str]:
        """Scalar figures for JSON output and tables (seconds, requests, tokens)."""
        out: dict[str, float | int | bool | str] = {
            "requests": self.n_requests,
            "completed": self.completed,
            "rejected": self.rejected,
            "rejected_too_large": self.rejected_too_large,
            "preemptions": self.total_preemptions,
            "span_s": self.span_s,
            "gpus": self.gpus,
            "throughput_rps": self.throughput_rps,
            "throughput_rps_per_gpu": self.throughput_rps_per_gpu,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "total_tokens_per_s": self.total_tokens_per_s,
            "busy_fraction_mean": float(self.busy_fraction.mean()),
            "busy_fraction_max": float(self.busy_fraction.max()),
            "stopped_early": self.stopped_early,
            "stop_reason": self.stop_reason,
            "wall_s": self.wall_s,
        }
        for name in ("queue", "ttft", "tpot", "e2e"):
            st: LatencyStats = getattr(self, name)
            for key in ("mean_s", "p50_s", "p90_s", "p95_s", "p99_s", "max_s"):
                out[f"{name}_{key}"] = getattr(st, key)
        g = self.goodput
        if g is not None:
            out["goodput_fraction"] = g.fraction
            out["goodput_rps"] = g.rate_rps
        return out

    def meets(self, sla: SLA | None = None) -> bool:
        """Whether the ``sla.quantile`` percentile of each limited metric is within its limit,
        with rejections counted as misses and no early stop."""
        s = sla or self.sla
        if s is None:
            raise ValueError("no SLA given")
        if self.stopped_early:
            return False
        n = self.n_requests
        allowed = s.allowed_violations(n)
        miss_base = n - self.completed
        for limit, values in ((s.ttft_s, self.ttft_s), (s.e2e_s, self.e2e_s), (s.tpot_s, None)):
            if limit is None:
                continue
            if values is None:
                misses = int((self.tpot_s > limit).sum()) + miss_base
            else:
                misses = int((values > limit).sum()) + miss_base
            if misses > allowed:
                return False
        return True


def _as_policy(policy: str | RoutingPolicy, seed: int) -> RoutingPolicy:
    return make_policy(policy, seed=seed) if isinstance(policy, str) else policy


def simulate(
    requests: Sequence[Request] | RequestArrays,
    replica: ReplicaSpec | Sequence[ReplicaSpec],
    *,
    n_replicas: int = 1,
    policy: str | RoutingPolicy = "least_cost",
    seed: int = 0,
    cost_model: CostModel | None = None,
    rate_scale: float = 1.0,
    max_queued_per_replica: int | None = None,
    sla: SLA | None = None,
    early_stop: EarlyStop | None = None,
    sample_interval_s: float | None = None,
    max_samples: int = 256,
) -> SimResult:
    """Simulate serving ``requests`` on a fleet of replicas behind a router.

    Args:
        requests: the workload (a list of Request, or RequestArrays); sorted by arrival here.
        replica: one spec (used ``n_replicas`` times) or one spec per replica.
        n_replicas: replicas when ``replica`` is a single spec.
        policy: routing policy name (``gpubalance.route.POLICIES``) or a policy object.
        seed: seed for the policy's random choices (power of two).
        cost_model: predicted request cost for cost-aware routing (see module docstring).
        rate_scale: replay arrivals this many times faster (trace time-scaling).
        max_queued_per_replica: admission cap on a replica's waiting queue (None: no cap).
        sla: limits for goodput and :meth:`SimResult.meets`.
        early_stop: stop as soon as failure is certain (see :class:`EarlyStop`).
        sample_interval_s: queue-depth sampling period in seconds; None spreads
            ``max_samples`` samples over the arrival span.
        max_samples: sample count when ``sample_interval_s`` is None (0 disables sampling).
    """
    wall0 = time.perf_counter()
    arr = scale_arrivals(as_request_arrays(requests), rate_scale)
    specs = [replica] * n_replicas if isinstance(replica, ReplicaSpec) else list(replica)
    if not specs:
        raise ValueError("simulate needs at least one replica")
    reps = [s.build() for s in specs]
    backends = [
        BackendState(name=s.name or f"replica-{j}", weight=s.weight) for j, s in enumerate(specs)
    ]
    choose = _as_policy(policy, seed).choose
    cm = cost_model if cost_model is not None else default_cost_model(specs[0].step_model)
    n = len(arr)
    arrival = arr.arrival_s
    t_list: list[float] = arrival.tolist()
    inp_l: list[int] = arr.input_tokens.tolist()
    out_l: list[int] = arr.output_tokens.tolist()
    costs: list[float] = (
        np.asarray(cm.costs_s(arr.input_tokens, arr.output_tokens), dtype=np.float64).tolist()
        if n
        else []
    )
    seqs: list[SeqState | None] = [None] * n
    replica_of = [-1] * n
    pending: list[tuple[float, int, int]] = []  # (finish_s, request, replica) not yet due
    counters = {"rejected": 0, "too_large": 0, "viol_ttft": 0, "viol_e2e": 0, "viol_tpot": 0}
    stop_sla = early_stop.sla if early_stop is not None else None
    max_wait = early_stop.max_waiting_per_replica if early_stop is not None else None
    allowed = stop_sla.allowed_violations(n) if stop_sla is not None else 0
    lim_ttft = stop_sla.ttft_s if stop_sla is not None and stop_sla.ttft_s is not None else math.inf
    lim_e2e = stop_sla.e2e_s if stop_sla is not None and stop_sla.e2e_s is not None else math.inf
    lim_tpot = stop_sla.tpot_s if stop_sla is not None and stop_sla.tpot_s is not None else math.inf
    rep_pairs = list(zip(reps, backends, strict=True))
    heappush = heapq.heappush
    heappop = heapq.heappop
    loop: EventLoop

    def check_violations(done: list[SeqState]) -> None:
        for s in done:
            i = s.key
            a = t_list[i]
            if s.first_token_s - a > lim_ttft:
                counters["viol_ttft"] += 1
            if s.finish_s - a > lim_e2e:
                counters["viol_e2e"] += 1
            o = s.output_tokens
            if o >= 2 and (s.finish_s - s.first_token_s) / (o - 1) > lim_tpot:
                counters["viol_tpot"] += 1
        worst = max(counters["viol_ttft"], counters["viol_e2e"], counters["viol_tpot"])
        if worst + counters["rejected"] + counters["too_large"] > allowed:
            loop.stop("SLA quantile can no longer be met")

    def collect(rep: Replica, b: BackendState, t: float) -> None:
        done = rep.done
        for s in done:
            if s.finish_s <= t:
                b.finish(costs[s.key])
            else:
                heappush(pending, (s.finish_s, s.key, replica_of[s.key]))
        if stop_sla is not None:
            check_violations(done)
        done.clear()

    def sync(t: float) -> None:
        # a replica inside a decode run that no arrival interrupted (t < quiet_until_s)
        # cannot change anything the router or the samples see: leave it for later
        for rep, b in rep_pairs:
            if rep.clock_s < t and t >= rep.quiet_until_s and (rep.running or rep.waiting):
                rep.advance(t)
                if rep.done:
                    collect(rep, b, t)
        while pending and pending[0][0] <= t:
            _, i, j = heappop(pending)
            backends[j].finish(costs[i])

    def on_arrival(t: float, i: int) -> None:
        sync(t)
        c = costs[i]
        try:
            j = choose(backends, c)
        except NoBackendAvailable:
            counters["rejected"] += 1
            return None
        rep = reps[j]
        if rep.clock_s < t and (rep.running or rep.waiting):  # skipped by sync while quiet
            rep.advance(t)
            if rep.done:
                collect(rep, backends[j], t)
        if max_queued_per_replica is not None and len(rep.waiting) >= max_queued_per_replica:
            counters["rejected"] += 1
            if stop_sla is not None and counters["rejected"] > allowed:
                loop.stop("SLA quantile can no longer be met (rejections)")
            return None
        try:
            seqs[i] = rep.add_tokens(i, inp_l[i], out_l[i])
        except RequestTooLarge:
            counters["too_large"] += 1
            return None
        if rep.clock_s < t:
            rep.clock_s = t  # it was idle (sync ran it up to t otherwise)
        replica_of[i] = j
        backends[j].start(c)
        if max_wait is not None and len(rep.waiting) > max_wait:
            loop.stop(f"replica {j} has more than {max_wait} requests waiting")
        return None

    sample_t: list[float] = []
    sample_w: list[list[int]] = []
    sample_r: list[list[int]] = []
    sample_kv: list[list[float]] = []
    t_end_arrivals = t_list[-1] if n else 0.0
    dt = sample_interval_s
    if dt is None and max_samples > 0 and n:
        span = t_end_arrivals - t_list[0]
        dt = span / max_samples if span > 0 else None
    if dt is not None and not dt > 0:
        raise ValueError(f"sample_interval_s must be > 0, got {dt}")

    def on_sample(t: float, _: Any) -> list[tuple[float, int, Any]] | None:
        sync(t)
        sample_t.append(t)
        w = [len(r.waiting) for r in reps]
        sample_w.append(w)
        sample_r.append([b.in_flight - k for b, k in zip(backends, w, strict=True)])
        sample_kv.append([1.0 - r.free_blocks / r.total_blocks for r in reps])
        if dt is not None and t + dt <= t_end_arrivals:
            return [(t + dt, _SAMPLE, None)]
        return None

    loop = EventLoop([on_arrival, on_sample])
    if dt is not None and n:
        loop.schedule(t_list[0], _SAMPLE)
    loop.run(t_list, _ARRIVAL)
    stopped = loop.stopped
    if not stopped:
        for rep in reps:
            rep.advance(math.inf)
            rep.done.clear()
        end_s = max((r.clock_s for r in reps), default=0.0)
        if n:
            end_s = max(end_s, t_list[-1])
    else:
        end_s = loop.now_s

    nan = math.nan
    fin = np.fromiter(
        (s.finish_s if s is not None and s.finish_s >= 0 else nan for s in seqs), np.float64, n
    )
    ftok = np.fromiter(
        (s.first_token_s if s is not None and s.first_token_s >= 0 else nan for s in seqs),
        np.float64,
        n,
    )
    fsch = np.fromiter(
        (s.first_scheduled_s if s is not None and s.first_scheduled_s >= 0 else nan for s in seqs),
        np.float64,
        n,
    )
    pre = np.fromiter((s.preemptions if s is not None else 0 for s in seqs), np.int64, n)
    done_mask = np.isfinite(fin)
    e2e = fin - arrival
    ttft = np.where(done_mask, ftok - arrival, nan)
    out_tok = arr.output_tokens
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(done_mask & (out_tok >= 2), (fin - ftok) / (out_tok - 1), nan)
    span = end_s - t_list[0] if n else 0.0
    return SimResult(
        arrival_s=arrival,
        input_tokens=arr.input_tokens,
        output_tokens=out_tok,
        replica=np.asarray(replica_of, dtype=np.int64),
        queue_s=fsch - arrival,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        preemptions=pre,
        rejected=counters["rejected"],
        rejected_too_large=counters["too_large"],
        span_s=float(span),
        replica_busy_s=np.array([r.busy_s for r in reps], dtype=np.float64),
        replica_iterations=np.array([r.iterations for r in reps], dtype=np.int64),
        replica_preemptions=np.array([r.preemptions for r in reps], dtype=np.int64),
        gpus=sum(s.gpu_count for s in specs),
        sample_s=np.asarray(sample_t, dtype=np.float64),
        waiting=np.asarray(sample_w, dtype=np.int64).reshape(len(sample_t), len(reps)),
        running=np.asarray(sample_r, dtype=np.int64).reshape(len(sample_t), len(reps)),
        kv_usage=np.asarray(sample_kv, dtype=np.float64).reshape(len(sample_t), len(reps)),
        stopped_early=stopped,
        stop_reason=loop.stop_reason,
        wall_s=time.perf_counter() - wall0,
        sla=sla,
    )
