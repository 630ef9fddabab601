"""The simulator-backed plan backend against independent checks: the analytic capacity
bound is never beaten by the simulator, fleets get faster with more replicas, and the
memory check matches hand arithmetic."""

from __future__ import annotations

import pytest

from gpubalance.hardware import load_gpu_catalog, resolve_model
from gpubalance.plan import Sla
from gpubalance.plan.sim_backend import SimBackend
from gpubalance.sim import generate_arrays


@pytest.fixture(scope="module")
def backend() -> SimBackend:
    cat = load_gpu_catalog()
    return SimBackend(
        gpus=[cat.get("H100-SXM"), cat.get("L4")],
        model=resolve_model("llama-3.1-8b"),
        precision="bf16",
        requests=generate_arrays(1500, seed=3, rate_rps=10.0, arrivals="poisson"),
        base_rate_rps=10.0,
    )


@pytest.mark.parametrize("gpu", ["H100-SXM", "L4"])
def test_capacity_bound_is_never_beaten(backend: SimBackend, gpu: str) -> None:
    cap = backend.capacity_rps(gpu, 1)
    # offer three times the bound to one replica: it saturates, and what it completes per
    # second of busy time cannot exceed the bound
    res = backend.simulate_fleet(gpu, 1, 1, 3.0 * cap, None, 0)
    served_per_busy_s = res.completed / float(res.replica_busy_s.sum())
    assert served_per_busy_s <= cap
    assert served_per_busy_s > 0.3 * cap  # and the bound is not absurdly loose


def test_more_replicas_never_slower(backend: SimBackend) -> None:
    p99 = [backend.evaluate("H100-SXM", 1, r, 30.0, None).ttft_p99_s for r in (1, 2, 4, 8)]
    assert p99 == sorted(p99, reverse=True)


def test_early_exit_stops_hopeless_runs(backend: SimBackend) -> None:
    sla = Sla(ttft_p99_s=0.5, e2e_p99_s=None)
    hopeless = backend.evaluate("L4", 1, 1, 30.0, sla)
    assert hopeless.stopped_early and not sla.met(hopeless)
    assert hopeless.completed < hopeless.requests


def test_memory_fit_by_hand(backend: SimBackend) -> None:
    # 8.03e9 params x 2 B = 16.06 GB: fits one 24 GB L4 and one 80 GB H100
    fit = backend.fit("H100-SXM", 1)
    assert fit.fits
    assert fit.weights_per_gpu_bytes == pytest.approx(16.06e9, rel=0.01)
    # KV: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B (128 KiB) per token; the
    # H100 leaves far more than the L4 for it
    assert (
        backend.fit("H100-SXM", 1).kv_capacity_tokens > 10 * backend.fit("L4", 1).kv_capacity_tokens
    )
    assert "128 KiB per token" in fit.explanation
