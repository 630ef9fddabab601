"""Simulator speed and accuracy.

1. Simulated requests per second of wall time (and of CPU time, steadier on a shared
   machine) on the embedded default workload (bursty, code-completion lengths), with the
   planner's default replica: Llama-3.1-8B bf16 on one H100 SXM (roofline model), for
   1 replica at the profile's rate and 8 replicas at 8x the rate. Target: >= 100,000.
   Beside it, the same fleet run by a per-iteration event simulation (one heap event per
   iteration, as vidur does), the baseline that :func:`gpubalance.sim.simulate`'s lazy
   replicas and collapsed decode runs replace; both give the same latencies.
2. M/M/1 agreement: one replica, batch size 1, exponential service, Poisson arrivals; the
   simulated mean wait against rho / (mu - lambda). Target: within 3% at rho 0.5 and 0.8.

Run: ``python benchmarks/bench_sim.py [--json] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import numpy as np

from gpubalance.cost.roofline import RooflineModel
from gpubalance.route import BackendState, make_policy
from gpubalance.sim import (
    EventLoop,
    LinearStepTime,
    ReplicaSpec,
    SeqState,
    generate_arrays,
    simulate,
)
from gpubalance.sim.fleet import default_cost_model
from gpubalance.workload import RequestArrays


def _timed(fn: Any, repeat: int) -> tuple[Any, float, float]:
    """Result, best wall seconds, best CPU seconds over ``repeat`` runs."""
    best_wall = best_cpu = math.inf
    out = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return out, best_wall, best_cpu


def per_iteration_baseline(
    arr: RequestArrays, spec: ReplicaSpec, n_replicas: int, policy: str
) -> np.ndarray:
    """Reference simulation with one heap event per replica iteration (vidur's shape):
    returns e2e latencies (s). Same replica model and router bookkeeping."""
    reps = [spec.build() for _ in range(n_replicas)]
    backends = [BackendState(f"r{j}") for j in range(n_replicas)]
    choose = make_policy(policy).choose
    # the same routing price simulate() uses by default (marginal cost on a busy replica)
    cost = default_cost_model(spec.step_model).costs_s(arr.input_tokens, arr.output_tokens).tolist()
    t_list = arr.arrival_s.tolist()
    inp, out = arr.input_tokens.tolist(), arr.output_tokens.tolist()
    seqs: list[SeqState | None] = [None] * len(t_list)
    stepping = [False] * n_replicas
    finishing: list[list[SeqState]] = [[] for _ in range(n_replicas)]

    def on_arrival(t: float, i: int) -> list[tuple[float, int, Any]] | None:
        j = choose(backends, cost[i])
        seqs[i] = reps[j].add_tokens(i, inp[i], out[i])
        backends[j].start(cost[i])
        if not stepping[j]:
            stepping[j] = True
            return [(t, 1, j)]
        return None

    def on_step(t: float, j: int) -> list[tuple[float, int, Any]] | None:
        rep = reps[j]
        for s in finishing[j]:
            backends[j].finish(cost[s.key])
        finishing[j] = []
        if not rep.has_work:
            stepping[j] = False
            return None
        res = rep.step(t)
        finishing[j] = res.finished
        return [(t + res.duration_s, 1, j)]

    EventLoop([on_arrival, on_step]).run(t_list, 0)  # type: ignore[list-item]
    fin = np.array([s.finish_s for s in seqs if s is not None])
    return fin - arr.arrival_s


def bench_speed(n: int, repeat: int) -> list[dict[str, Any]]:
    model = RooflineModel.from_names("h100-sxm", "llama-3.1-8b")
    spec = ReplicaSpec(model, max_num_seqs=256, max_batched_tokens=8192)
    rows = []
    for n_rep in (1, 8):
        arr = generate_arrays(n, seed=0)
        arr = RequestArrays(arr.arrival_s / n_rep, arr.input_tokens, arr.output_tokens)
        res, wall, cpu = _timed(
            lambda arr=arr, n_rep=n_rep: simulate(arr, spec, n_replicas=n_rep, policy="least_cost"),
            repeat,
        )
        n_base = min(n, 20_000)
        sub = RequestArrays(
            arr.arrival_s[:n_base], arr.input_tokens[:n_base], arr.output_tokens[:n_base]
        )
        e2e_base, bwall, _ = _timed(
            lambda sub=sub, n_rep=n_rep: per_iteration_baseline(sub, spec, n_rep, "least_cost"),
            1,
        )
        check = simulate(sub, spec, n_replicas=n_rep, policy="least_cost")
        max_diff = float(np.max(np.abs(check.e2e_s - e2e_base)))
        rows.append(
            {
                "case": f"{n_rep} replica(s), {n_rep}x rate",
                "requests": n,
                "sim_req_per_wall_s": n / wall,
                "sim_req_per_cpu_s": n / cpu,
                "target_ratio": (n / wall) / 100_000,
                "baseline_req_per_wall_s": n_base / bwall,
                "speedup_vs_per_iteration": (n / wall) / (n_base / bwall),
                "max_e2e_diff_vs_baseline_s": max_diff,
                "busy_fraction_mean": float(res.busy_fraction.mean()),
                "p99_ttft_s": res.ttft.p99_s,
                "p99_e2e_s": res.e2e.p99_s,
            }
        )
    return rows


def bench_mm1(quick: bool) -> list[dict[str, Any]]:
    rows = []
    for rho, n in ((0.5, 400_000), (0.8, 1_000_000), (0.9, 2_000_000)):
        if quick:
            n //= 10
        rng = np.random.default_rng(0)
        m_tokens = 1_000_000
        es = 1e-6 / -math.expm1(-1.0 / m_tokens)  # mean service of ceil(Exp) tokens, s
        t = np.cumsum(rng.exponential(es / rho, n))
        inp = np.ceil(rng.exponential(m_tokens, n)).astype(np.int64)
        spec = ReplicaSpec(
            LinearStepTime(per_prefill_token_s=1e-6),
            kv_capacity_tokens=10**10,
            max_num_seqs=1,
            max_batched_tokens=10**9,
        )
        res = simulate(RequestArrays(t, inp, np.ones(n, dtype=np.int64)), spec, max_samples=0)
        wq = rho * es / (1 - rho)
        sim = float(res.queue_s.mean())
        rows.append(
            {
                "rho": rho,
                "requests": n,
                "wq_sim_s": sim,
                "wq_theory_s": wq,
                "rel_error": sim / wq - 1.0,
                "busy_fraction": float(res.busy_fraction[0]),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--requests", type=int, default=200_000, help="requests per speed case")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = ap.parse_args()
    n = args.requests // 10 if args.quick else args.requests
    speed = bench_speed(n, 1 if args.quick else args.repeat)
    mm1 = bench_mm1(args.quick)
    if args.json:
        print(json.dumps({"speed": speed, "mm1": mm1}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    con = Console(width=160)
    t1 = Table(title="Simulated requests per second (target >= 100,000)")
    for col in (
        "case",
        "req/wall-s",
        "req/CPU-s",
        "vs target",
        "per-iteration sim",
        "speedup",
        "max |Δe2e| s",
        "busy",
        "p99 TTFT s",
        "p99 e2e s",
    ):
        t1.add_column(col, justify="right")
    for r in speed:
        t1.add_row(
            r["case"],
            f"{r['sim_req_per_wall_s']:,.0f}",
            f"{r['sim_req_per_cpu_s']:,.0f}",
            f"{r['target_ratio']:.2f}x",
            f"{r['baseline_req_per_wall_s']:,.0f}",
            f"{r['speedup_vs_per_iteration']:.1f}x",
            f"{r['max_e2e_diff_vs_baseline_s']:.1e}",
            f"{r['busy_fraction_mean']:.2f}",
            f"{r['p99_ttft_s']:.2f}",
            f"{r['p99_e2e_s']:.2f}",
        )
    con.print(t1)
    t2 = Table(title="M/M/1 mean wait: simulated vs theory (target within 3% at 0.5, 0.8)")
    for col in ("rho", "requests", "Wq sim s", "Wq theory s", "rel error", "busy"):
        t2.add_column(col, justify="right")
    for r in mm1:
        t2.add_row(
            f"{r['rho']}",
            f"{r['requests']:,}",
            f"{r['wq_sim_s']:.4f}",
            f"{r['wq_theory_s']:.4f}",
            f"{r['rel_error']:+.2%}",
            f"{r['busy_fraction']:.3f}",
        )
    con.print(t2)


if __name__ == "__main__":
    main()
