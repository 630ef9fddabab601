"""The planner: size, price and rank every deployment shape for one model and workload.

For each GPU type and tensor-parallel degree whose replica holds the model, it finds the
smallest number of replicas that meets the SLA at today's load and at the load projected
after ``months`` of compounding monthly growth (simulation, bracketed by an analytic
capacity bound, galloping + bisection, results cached). Node shapes (GPUs per node) of the
same GPU and TP share those answers: a shape with ``r`` replicas per node needs
``ceil(replicas / r)`` nodes. Each shape is then priced, its failure domain sized (the
fleet with one node down is simulated), and the cheapest one that meets the SLA now and
after growth is recommended, preferring fleets that survive one node failure and, on equal
cost, smaller failure domains.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpubalance.errors import UserInputError
from gpubalance.plan.backend import PlanBackend, ReplicaFit
from gpubalance.plan.failure import failure_domain, nodes_needed
from gpubalance.plan.pricing import PriceBook, fleet_cost
from gpubalance.plan.recommend import best_achievable, explain, rank_key
from gpubalance.plan.result import Candidate, PlanInputsSummary, PlanResult, PlanStats
from gpubalance.plan.search import smallest_passing
from gpubalance.plan.shapes import NODE_SIZES, GpuOffer, Shape, enumerate_shapes
from gpubalance.plan.sla import LatencySummary, Sla

__all__ = ["PlanSettings", "ProgressFn", "growth_factor", "make_plan"]

#: ``progress(done, total, what)`` is called as the search advances.
ProgressFn = Callable[[int, int, str], None]


def growth_factor(growth_monthly: float, months: int) -> float:
    """Load multiplier after ``months`` of compounding ``growth_monthly`` (0.05 = 5 %/month)."""
    if growth_monthly <= -1:
        raise UserInputError(f"monthly growth must be > -100%, got {growth_monthly:g}")
    if months < 0:
        raise UserInputError(f"months must be >= 0, got {months}")
    return float((1.0 + growth_monthly) ** months)


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """Planner settings.

    Attributes:
        rate_rps: today's arrival rate, requests per second.
        sla: latency objectives.
        growth_monthly: compounding monthly growth of the rate (0.05 = 5 %).
        months: planning horizon in months.
        prices: price book (GPU price overrides and other costs).
        node_sizes: GPUs-per-node options (capped by each GPU's maximum).
        max_replicas: largest fleet (replicas of one shape) the search tries.
        spare_node: size every fleet so it still meets the SLA at the projected load with
            one node down (one spare node unless rounding already leaves that much room);
            fleets are then compared at equal resilience. Without it, fleets that survive
            one node down today rank before those that do not.
        detail_top: the best this-many sized candidates (and the runner-up) are also
            simulated at today's load and with one node down; the others' one-node-down
            answers follow from their minimal replica counts.
        prune: skip simulating (GPU, TP) pairs whose analytic lower-bound cost already
            exceeds the best candidate found (they could never be recommended).
        model / precision / workload / requests_per_simulation / mean_*: echoed in reports.
    """

    rate_rps: float
    sla: Sla
    growth_monthly: float = 0.05
    months: int = 12
    prices: PriceBook = field(default_factory=PriceBook)
    node_sizes: tuple[int, ...] = NODE_SIZES
    max_replicas: int = 512
    spare_node: bool = True
    prune: bool = True
    detail_top: int = 10
    model: str = ""
    precision: str = ""
    workload: str = ""
    requests_per_simulation: int = 0
    mean_input_tokens: float = 0.0
    mean_output_tokens: float = 0.0


class _Evaluator:
    """Memoised simulations keyed by (gpu, tp, replicas, rate)."""

    def __init__(self, backend: PlanBackend, sla: Sla, stats: PlanStats) -> None:
        self.backend = backend
        self.sla = sla
        self.stats = stats
        self.cache: dict[tuple[str, int, int, float], LatencySummary] = {}

    def summary(
        self, gpu: str, tp: int, replicas: int, rate: float, *, full: bool = False
    ) -> LatencySummary:
        key = (gpu, tp, replicas, rate)
        hit = self.cache.get(key)
        if hit is not None and not (full and hit.stopped_early):
            self.stats.cache_hits += 1
            return hit
        res = self.backend.evaluate(gpu, tp, replicas, rate, None if full else self.sla)
        self.stats.simulations += 1
        self.stats.simulated_requests += res.completed
        self.cache[key] = res
        return res

    def passes(self, gpu: str, tp: int, replicas: int, rate: float) -> bool:
        return self.sla.met(self.summary(gpu, tp, replicas, rate))


def _passes_at(ev: _Evaluator, gpu: str, tp: int, rate: float, replicas: int) -> bool:
    return ev.passes(gpu, tp, replicas, rate)


def _lower_bound_replicas(rate: float, capacity_rps: float) -> int:
    if capacity_rps <= 0 or not math.isfinite(capacity_rps):
        return 1
    return max(1, math.ceil(rate / capacity_rps - 1e-9))


def make_plan(
    backend: PlanBackend, settings: PlanSettings, progress: ProgressFn | None = None
) -> PlanResult:
    """Size, price and rank every shape; raise UserInputError when nothing fits or no
    shape meets the SLA (saying what the best achievable is, and where)."""
    t0 = time.perf_counter()
    stats = PlanStats()
    sla = settings.sla
    book = settings.prices
    rate_now = float(settings.rate_rps)
    if not (rate_now > 0 and math.isfinite(rate_now)):
        raise UserInputError(f"arrival rate must be > 0 req/s, got {settings.rate_rps}")
    rate_growth = rate_now * growth_factor(settings.growth_monthly, settings.months)
    offers: dict[str, GpuOffer] = {o.name: o for o in backend.offers()}
    if not offers:
        raise UserInputError("no GPU types to plan for")
    price = {name: book.gpu_hour_usd.get(name, o.price_gpu_hour_usd) for name, o in offers.items()}
    price_src = {
        name: ("price file" if name in book.gpu_hour_usd else o.price_source)
        for name, o in offers.items()
    }
    shapes = list(enumerate_shapes(offers.values(), settings.node_sizes))
    fits: dict[tuple[str, int], ReplicaFit] = {}
    for s in shapes:
        if (s.gpu, s.tp) not in fits:
            fits[(s.gpu, s.tp)] = backend.fit(s.gpu, s.tp)
    dropped = [f for f in fits.values() if not f.fits]
    pairs = [k for k, f in fits.items() if f.fits]
    if not pairs:
        raise UserInputError(_nothing_fits_message(settings, dropped, offers))
    by_pair: dict[tuple[str, int], list[Shape]] = {k: [] for k in pairs}
    for s in shapes:
        if (s.gpu, s.tp) in by_pair:
            by_pair[(s.gpu, s.tp)].append(s)

    # analytic lower bounds: start points for the search and pruning
    cap_rps = {k: backend.capacity_rps(*k) for k in pairs}
    lb_growth = {k: _lower_bound_replicas(rate_growth, cap_rps[k]) for k in pairs}

    def lb_cost(k: tuple[str, int]) -> float:
        return min(
            fleet_cost(s, nodes_needed(lb_growth[k], s), price[s.gpu], book).month_usd
            for s in by_pair[k]
        )

    order = sorted(pairs, key=lambda k: (lb_cost(k), k))
    ev = _Evaluator(backend, sla, stats)
    mean_tokens = backend.mean_tokens_per_request()
    candidates: list[Candidate] = []
    total = len(order)
    for i, key in enumerate(order):
        gpu, tp = key
        if progress is not None:
            progress(i, total, f"{gpu} TP{tp}")
        fit = fits[key]
        best = _best_so_far(candidates, settings.spare_node)
        bound = lb_cost(key)
        if settings.prune and best is not None and bound > (best.month_usd or math.inf) + 0.005:
            for s in by_pair[key]:
                lb_nodes = nodes_needed(lb_growth[key], s)
                candidates.append(
                    Candidate(
                        shape=s,
                        status="pruned",
                        fit=fit,
                        price_gpu_hour_usd=price[gpu],
                        price_source=price_src[gpu],
                        lower_bound_month_usd=fleet_cost(s, lb_nodes, price[gpu], book).month_usd,
                        note=(
                            f"needs at least {lb_growth[key]} replicas (analytic bound), "
                            f"costing more than the best candidate "
                            f"(${best.month_usd:,.0f}/month)"
                        ),
                    )
                )
            continue
        cap = max(settings.max_replicas, lb_growth[key])
        start_now = _lower_bound_replicas(rate_now, cap_rps[key])
        found_now = smallest_passing(
            functools.partial(_passes_at, ev, gpu, tp, rate_now), start=start_now, cap=cap
        )
        found_growth = (
            None
            if found_now.value is None
            else smallest_passing(
                functools.partial(_passes_at, ev, gpu, tp, rate_growth),
                start=max(found_now.value, lb_growth[key]),
                cap=cap,
            )
        )
        r_now = found_now.value
        r_growth = None if found_growth is None else found_growth.value
        if r_now is None or r_growth is None:
            probe_rate = rate_now if r_now is None else rate_growth
            best_lat = ev.summary(gpu, tp, cap, probe_rate, full=True)
            for s in by_pair[key]:
                candidates.append(
                    Candidate(
                        shape=s,
                        status="infeasible",
                        fit=fit,
                        price_gpu_hour_usd=price[gpu],
                        price_source=price_src[gpu],
                        best_latency=best_lat,
                        best_replicas_tried=cap,
                        note=(
                            f"{cap} replicas still miss the SLA at {probe_rate:.3g} req/s: "
                            + "; ".join(sla.violations(best_lat))
                        ),
                    )
                )
            continue
        for s in by_pair[key]:
            candidates.append(
                _sized_candidate(
                    s,
                    fit,
                    r_now,
                    r_growth,
                    ev,
                    settings,
                    rate_now,
                    rate_growth,
                    price[gpu],
                    price_src[gpu],
                    mean_tokens,
                )
            )
    if progress is not None:
        progress(total, total, "done")

    ok = [c for c in candidates if c.status == "ok"]
    ranked = sorted(ok, key=lambda c: rank_key(c, settings.spare_node))
    inputs = PlanInputsSummary(
        model=settings.model,
        precision=settings.precision,
        workload=settings.workload,
        rate_now_rps=rate_now,
        growth_monthly=settings.growth_monthly,
        months=settings.months,
        rate_growth_rps=rate_growth,
        sla=sla,
        requests_per_simulation=settings.requests_per_simulation,
        mean_input_tokens=settings.mean_input_tokens,
        mean_output_tokens=settings.mean_output_tokens,
        hours_per_month=book.hours_per_month,
        spare_node=settings.spare_node,
    )
    if not ranked:
        raise UserInputError(best_achievable(candidates, sla, rate_now, rate_growth))
    rec = ranked[0]
    for c in ranked[: settings.detail_top]:
        _detail(c, ev, settings, rate_now, rate_growth)
    runner = next(
        (c for c in ranked[1:] if (c.shape.gpu, c.shape.tp) != (rec.shape.gpu, rec.shape.tp)), None
    )
    if runner is None and len(ranked) > 1:
        runner = ranked[1]
    if runner is not None and not runner.one_node_down_simulated:
        _detail(runner, ev, settings, rate_now, rate_growth)
    candidates.sort(key=lambda c: _display_key(c, settings.spare_node))
    stats.wall_s = time.perf_counter() - t0
    return PlanResult(
        inputs=inputs,
        candidates=candidates,
        dropped=dropped,
        recommendation=rec,
        runner_up=runner,
        explanation=explain(rec, runner, candidates, inputs),
        stats=stats,
    )


def _best_so_far(candidates: list[Candidate], prefer_safe: bool) -> Candidate | None:
    ok = [c for c in candidates if c.status == "ok"]
    if prefer_safe:
        ok = [c for c in ok if c.failure is not None and c.failure.sla_holds_one_node_down_now]
    return min(ok, key=lambda c: c.month_usd or math.inf, default=None)


def _display_key(c: Candidate, prefer_safe: bool) -> tuple[int, tuple[object, ...]]:
    order = {"ok": 0, "infeasible": 1, "pruned": 2}[c.status]
    if c.status == "ok":
        return (0, rank_key(c, prefer_safe))
    lb = c.lower_bound_month_usd if c.lower_bound_month_usd is not None else math.inf
    return (order, (lb, c.shape.gpu, c.shape.gpus_per_node, c.shape.tp))


def _sized_candidate(
    s: Shape,
    fit: ReplicaFit,
    r_now: int,
    r_growth: int,
    ev: _Evaluator,
    settings: PlanSettings,
    rate_now: float,
    rate_growth: float,
    price_gpu_hour: float,
    price_source: str,
    mean_tokens: float,
) -> Candidate:
    # Under the search's monotonicity (more replicas never break an SLA fewer meet),
    # r_now / r_growth decide every "does this fleet meet the SLA" question below; the
    # top candidates are then simulated with one node down as well (see _detail).
    rpn = s.replicas_per_node
    nodes_now = nodes_needed(r_now, s)
    nodes_min = nodes_needed(r_growth, s)
    nodes = nodes_min
    if settings.spare_node and not (nodes_min > 1 and (nodes_min - 1) * rpn >= r_growth):
        nodes = nodes_min + 1  # so that nodes - 1 still hold r_growth replicas
    replicas = nodes * rpn
    lat_growth = ev.summary(s.gpu, s.tp, replicas, rate_growth, full=True)
    fd = failure_domain(
        s,
        nodes,
        r_growth,
        holds_one_down_now=(nodes - 1) * rpn >= r_now,
        holds_one_down_growth=(nodes - 1) * rpn >= r_growth,
    )
    book = settings.prices
    cost = fleet_cost(s, nodes, price_gpu_hour, book)
    hours = book.hours_per_month
    return Candidate(
        shape=s,
        status="ok",
        fit=fit,
        price_gpu_hour_usd=price_gpu_hour,
        price_source=price_source,
        replicas_now=r_now,
        replicas_growth=r_growth,
        nodes_now=nodes_now,
        nodes_min=nodes_min,
        nodes=nodes,
        cost=cost,
        min_month_usd=fleet_cost(s, nodes_min, price_gpu_hour, book).month_usd,
        usd_per_million_tokens_now=cost.usd_per_million_tokens(rate_now, mean_tokens, hours),
        usd_per_million_tokens_growth=cost.usd_per_million_tokens(rate_growth, mean_tokens, hours),
        latency_growth=lat_growth,
        failure=fd,
        rps_per_gpu_growth=rate_growth / (nodes * s.gpus_per_node),
    )


def _detail(
    c: Candidate, ev: _Evaluator, settings: PlanSettings, rate_now: float, rate_growth: float
) -> None:
    """Simulate a sized candidate at today's load and with one node down (now and at the
    projected load); the one-node-down answers replace the arithmetic ones."""
    s = c.shape
    assert c.nodes is not None and c.replicas_growth is not None
    replicas = c.nodes * s.replicas_per_node
    c.latency_now = ev.summary(s.gpu, s.tp, replicas, rate_now, full=True)
    if c.nodes > 1:
        down = replicas - s.replicas_per_node
        c.latency_one_down_now = ev.summary(s.gpu, s.tp, down, rate_now, full=True)
        c.latency_one_down_growth = ev.summary(s.gpu, s.tp, down, rate_growth, full=True)
    sla = settings.sla
    c.failure = failure_domain(
        s,
        c.nodes,
        c.replicas_growth,
        holds_one_down_now=c.latency_one_down_now is not None and sla.met(c.latency_one_down_now),
        holds_one_down_growth=c.latency_one_down_growth is not None
        and sla.met(c.latency_one_down_growth),
    )
    c.one_node_down_simulated = True


def _nothing_fits_message(
    settings: PlanSettings, dropped: list[ReplicaFit], offers: dict[str, GpuOffer]
) -> str:
    # the closest miss: the replica with the most memory in total
    closest = max(dropped, key=lambda f: (offers[f.gpu].memory_bytes * f.tp, f.gpu))
    what = f"{settings.model} at {settings.precision}" if settings.model else "the model"
    return (
        f"{what} fits on no candidate GPU shape (tried {', '.join(sorted(offers))}, TP up to "
        f"{max(f.tp for f in dropped)}); closest: {closest.gpu} TP{closest.tp}: "
        f"{closest.explanation}"
    )
