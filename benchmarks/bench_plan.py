"""Speed of the default ``gpubalance plan``: wall time and simulated requests per second.

Targets (issue 3): the default plan (no arguments) in under 60 s on this 2-core machine;
>= 100,000 simulated requests per second of wall time. Peers, from their published
figures (not run here): NVIDIA AIConfigurator reports about 30 s per search, Vidur's
configuration search about an hour. Rows:

* ``cli default``: ``gpubalance plan --json`` in a fresh process (imports included).
* ``planner default``: the same plan in-process (search + final CDF simulations).
* ``planner, no pruning``: every (GPU, TP) pair simulated (what pruning saves).
* ``one simulation``: one 4,000-request fleet simulation (the unit of work).

The machine is shared with other jobs: compare ratios, not absolute seconds.

    python benchmarks/bench_plan.py [--json] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from gpubalance.plan.config import PlanRequest
from gpubalance.plan.entry import load_workload, run_plan

AICONFIGURATOR_S = 30.0
VIDUR_S = 3600.0
TARGET_S = 60.0


def bench_cli() -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "plan", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"gpubalance plan failed: {proc.stderr}")
    json.loads(proc.stdout)
    return wall


def bench_planner(prune: bool) -> dict[str, float]:
    t0 = time.perf_counter()
    res = run_plan(PlanRequest(prune=prune))
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "search_wall_s": res.stats.wall_s,
        "simulations": float(res.stats.simulations),
        "simulated_requests": float(res.stats.simulated_requests),
        "sim_requests_per_s": res.stats.simulated_requests / res.stats.wall_s,
    }


def bench_one_simulation() -> dict[str, float]:
    from gpubalance.plan.sim_backend import SimBackend

    req = PlanRequest()
    arrays, rate, _ = load_workload(req)
    from gpubalance.hardware import load_gpu_catalog, resolve_model

    backend = SimBackend(
        gpus=[load_gpu_catalog().get("H100-SXM")],
        model=resolve_model("llama-3.1-8b"),
        precision="bf16",
        requests=arrays,
        base_rate_rps=rate,
    )
    backend.evaluate("H100-SXM", 1, 4, rate * 1.8, None)  # warm-up
    t0 = time.perf_counter()
    n = 5
    for _ in range(n):
        backend.evaluate("H100-SXM", 1, 4, rate * 1.8, None)
    wall = (time.perf_counter() - t0) / n
    return {
        "wall_s": wall,
        "requests": float(len(arrays)),
        "sim_requests_per_s": len(arrays) / wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each row (best is kept)")
    args = ap.parse_args()

    cli = min(bench_cli() for _ in range(args.repeat))
    pruned = min((bench_planner(True) for _ in range(args.repeat)), key=lambda r: r["wall_s"])
    full = min((bench_planner(False) for _ in range(args.repeat)), key=lambda r: r["wall_s"])
    one = bench_one_simulation()
    rows = {
        "cli_default_wall_s": cli,
        "planner_default": pruned,
        "planner_no_pruning": full,
        "one_simulation": one,
        "ratios": {
            "target_60s_over_cli": TARGET_S / cli,
            "aiconfigurator_30s_over_cli": AICONFIGURATOR_S / cli,
            "vidur_1h_over_cli": VIDUR_S / cli,
            "no_pruning_over_pruning_wall": full["wall_s"] / pruned["wall_s"],
            "sim_req_per_s_over_100k_target": pruned["sim_requests_per_s"] / 100_000,
        },
    }
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'row':<28}{'wall s':>10}{'simulations':>13}{'sim req':>12}{'sim req/s':>12}")
    print(f"{'cli default (fresh proc)':<28}{cli:>10.2f}")
    for name, r in (("planner default", pruned), ("planner, no pruning", full)):
        print(
            f"{name:<28}{r['wall_s']:>10.2f}{r['simulations']:>13.0f}"
            f"{r['simulated_requests']:>12,.0f}{r['sim_requests_per_s']:>12,.0f}"
        )
    print(
        f"{'one simulation (4 x H100)':<28}{one['wall_s']:>10.3f}{1:>13}"
        f"{one['requests']:>12,.0f}{one['sim_requests_per_s']:>12,.0f}"
    )
    print()
    for k, v in rows["ratios"].items():  # type: ignore[union-attr]
        print(f"{k:<34}{v:>10.2f}x")


if __name__ == "__main__":
    main()
