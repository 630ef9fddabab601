"""One entry point from a :class:`PlanRequest` to a :class:`PlanResult`.

Loads the catalogs, the price file and the workload, builds the simulator-backed backend,
runs :func:`make_plan`, then simulates the recommendation and runner-up once more in full
for their latency distributions (CDF plots). Every user mistake raises UserInputError
before any simulation starts.
"""

from __future__ import annotations

import numpy as np

from gpubalance.cost.roofline import RooflineEfficiency
from gpubalance.errors import UserInputError
from gpubalance.hardware import load_gpu_catalog, precision_named, resolve_model
from gpubalance.plan.config import DEFAULT_RATE_RPS, PlanRequest
from gpubalance.plan.planner import PlanSettings, ProgressFn, make_plan
from gpubalance.plan.pricing import PriceBook, load_price_file
from gpubalance.plan.result import PlanResult
from gpubalance.plan.sim_backend import SimBackend
from gpubalance.sim import as_request_arrays, generate_arrays
from gpubalance.workload import RequestArrays, default_profile, load_trace
from gpubalance.workload.generators import ArrivalKind

__all__ = ["load_workload", "run_plan"]


def load_workload(req: PlanRequest) -> tuple[RequestArrays, float, str]:
    """(requests, their arrival rate in req/s, description) for ``req``.

    A trace keeps its own arrival pattern (its first ``req.requests`` requests), sped up
    by ``time_scale``; ``rate_rps`` rescales it to that mean rate instead. Without a trace,
    ``req.requests`` requests are generated from the embedded profile at ``rate_rps``.
    """
    if req.trace is not None:
        reqs = load_trace(req.trace)
        if len(reqs) < 2:
            raise UserInputError("a trace needs at least 2 requests", file=req.trace)
        arr = as_request_arrays(reqs)
        n = min(len(arr), req.requests)
        t = arr.arrival_s[:n] - arr.arrival_s[0]
        span = float(t[-1])
        if span <= 0:
            raise UserInputError("all requests of the trace arrive at once", file=req.trace)
        native = (n - 1) / span
        rate = req.rate_rps if req.rate_rps is not None else native * req.time_scale
        arrays = RequestArrays(t * (native / rate), arr.input_tokens[:n], arr.output_tokens[:n])
        return arrays, rate, f"trace {req.trace.name} (first {n} requests)"
    prof = default_profile()
    rate = req.rate_rps if req.rate_rps is not None else DEFAULT_RATE_RPS
    kind: ArrivalKind | None = "poisson" if req.arrivals == "poisson" else None
    arrays = generate_arrays(
        req.requests, seed=req.seed, profile=prof, rate_rps=rate, arrivals=kind
    )
    how = (
        "Poisson arrivals"
        if req.arrivals == "poisson"
        else f"bursty arrivals (gap CV {prof.interarrival_cv:.1f})"
    )
    return arrays, rate, f"profile {prof.name}: {req.requests} requests, {how}"


def run_plan(req: PlanRequest, progress: ProgressFn | None = None) -> PlanResult:
    """Plan for ``req``; UserInputError for any bad input or impossible plan."""
    catalog = load_gpu_catalog(req.catalog)
    if req.gpus:
        names: list[str] = []
        for g in req.gpus:
            spec = catalog.get(g)  # unknown -> UserInputError suggesting the nearest
            if spec.name not in names:
                names.append(spec.name)
        specs = [catalog.get(n) for n in names]
    else:
        specs = catalog.specs()
    model = resolve_model(req.model, req.models_file)
    precision = precision_named(req.precision).name
    book = (
        load_price_file(req.price_file, known_gpus=catalog.names())
        if req.price_file is not None
        else PriceBook()
    )
    arrays, rate, workload = load_workload(req)
    backend = SimBackend(
        gpus=specs,
        model=model,
        precision=precision,
        requests=arrays,
        base_rate_rps=rate,
        efficiency=None if req.efficiency is None else RooflineEfficiency.load(req.efficiency),
        policy=req.policy,
        seed=req.seed,
    )
    settings = PlanSettings(
        rate_rps=rate,
        sla=req.sla,
        growth_monthly=req.growth_monthly,
        months=req.months,
        prices=book,
        node_sizes=tuple(sorted(set(req.node_sizes))),
        max_replicas=req.max_replicas,
        spare_node=req.spare_node,
        prune=req.prune,
        model=model.name,
        precision=precision,
        workload=workload,
        requests_per_simulation=len(arrays),
        mean_input_tokens=float(np.mean(arrays.input_tokens)),
        mean_output_tokens=float(np.mean(arrays.output_tokens)),
    )
    result = make_plan(backend, settings, progress)
    for label, cand in (("recommended", result.recommendation), ("runner-up", result.runner_up)):
        if cand is not None and cand.nodes is not None:
            replicas = cand.nodes * cand.shape.replicas_per_node
            result.samples[label] = backend.samples(
                cand.shape.gpu, cand.shape.tp, replicas, result.inputs.rate_growth_rps
            )
    return result
