"""Balancing benchmarks, side by side with the baselines named in issue 2.

    python benchmarks/bench_balance.py [--json] [--quick]

1. Global partition, makespan / lower bound: count (torch DistributedSampler's round
   robin) vs LPT vs Karmarkar–Karp, on the shared Azure code trace and the embedded default
   workload, 8 and 64 ranks (target KK <= 1.001).
2. Step-synchronous batches, global batch 256 on 8 ranks: mean over steps of the per-step
   max / mean rank cost for torch's DistributedSampler, transformers' LengthGroupedSampler
   (as HF Trainer + accelerate shard it: per-device batches dealt to ranks in turn) and
   gpubalance (CostBalancedDistributedSampler; balanced_step_plan with KK). Target <= 1.05.
3. Packing efficiency of budgeted micro-batches (unpadded cost / budget). Target >= 99.5%.
4. Throughput on 1M items into 64 ranks (targets: LPT >= 1e6 items/s, KK >= 3e5 items/s),
   beside the pure-Python reference kernels.
5. Sampler cost per step at 8, 64 and 512 ranks (fixed per-rank batch), beside torch's
   DistributedSampler.

Costs: the CLI's default TokenCostModel (quadratic prefill). Absolute times drift on a
shared machine; ratios are what count.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from gpubalance.balance import (
    BatchConstraint,
    CostBalancedBatchSampler,
    CostBalancedDistributedSampler,
    balanced_step_plan,
    get_partitioner,
    pack_micro_batches,
    packing_stats,
)
from gpubalance.cli.partition import DEFAULT_COST_COEFFICIENTS
from gpubalance.cost import TokenCostModel
from gpubalance.workload import default_workload, load_trace, to_arrays

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO.parent / "shared" / "data" / "azure-llm-inference-2023-code.csv"
MODEL = TokenCostModel(**DEFAULT_COST_COEFFICIENTS)


def workloads() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (costs_s, tokens)."""
    out = {}
    sources = [("default workload", default_workload())]
    if TRACE.exists():
        sources.insert(0, ("azure code trace", load_trace(TRACE)))
    for name, reqs in sources:
        a = to_arrays(reqs)
        out[name] = (
            MODEL.costs_s(a.input_tokens, a.output_tokens),
            a.input_tokens + a.output_tokens,
        )
    return out


def bench_partition(data: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
    rows = []
    for name, (costs, _) in data.items():
        for k in (8, 64):
            row: dict[str, Any] = {"workload": name, "ranks": k}
            for policy in ("count", "lpt", "kk"):
                m = get_partitioner(policy).partition(costs, k).metrics()
                row[policy] = m.makespan_over_lower_bound
            row["kk_equal_counts"] = (
                get_partitioner("kk", equal_counts=True)
                .partition(costs, k)
                .metrics()
                .makespan_over_lower_bound
            )
            rows.append(row)
    return rows


def _step_ratio(rank_items: list[list[int]], costs: np.ndarray, b: int) -> float:
    """Mean over steps of max/mean rank cost, ranks' lists cut into batches of b."""
    arr = [np.asarray(x) for x in rank_items]
    steps = min(len(x) for x in arr) // b
    ratios = []
    for s in range(steps):
        rc = np.array([costs[x[s * b : (s + 1) * b]].sum() for x in arr])
        ratios.append(rc.max() / rc.mean())
    return float(np.mean(ratios))


def _length_grouped_ranks(tokens: np.ndarray, k: int, b: int, seed: int) -> list[list[int]] | None:
    try:
        import torch
        from transformers.trainer_pt_utils import LengthGroupedSampler
    except Exception:
        return None
    g = torch.Generator()
    g.manual_seed(seed)
    order = list(LengthGroupedSampler(b, lengths=tokens.tolist(), generator=g))
    batches = [order[i : i + b] for i in range(0, len(order) - b + 1, b)]
    usable = (len(batches) // k) * k
    return [[i for j in range(r, usable, k) for i in batches[j]] for r in range(k)]


def bench_steps(data: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
    import torch.utils.data as tud

    k, gb = 8, 256
    b = gb // k
    rows = []
    for name, (costs, tokens) in data.items():
        n = costs.shape[0]
        torch_ranks = []
        for r in range(k):
            s = tud.DistributedSampler(range(n), num_replicas=k, rank=r, shuffle=True, seed=0)
            torch_ranks.append(list(s))
        ours = [
            list(
                CostBalancedDistributedSampler(
                    costs_s=costs, num_replicas=k, rank=r, batch_size=b, seed=0
                )
            )
            for r in range(k)
        ]
        lgs = _length_grouped_ranks(tokens, k, b, 0)
        plan = balanced_step_plan(costs, k, gb, policy="kk", seed=0)
        con = BatchConstraint(max_cost_s=float(costs.max()) * 2)
        bs = [list(CostBalancedBatchSampler(costs, con, num_replicas=k, rank=r)) for r in range(k)]
        bs_ratio = float(
            np.mean(
                [
                    max(con.batch_cost_s(costs[bs[r][s]]) for r in range(k))
                    / np.mean([con.batch_cost_s(costs[bs[r][s]]) for r in range(k)])
                    for s in range(len(bs[0]))
                ]
            )
        )
        rows.append(
            {
                "workload": name,
                "torch DistributedSampler": _step_ratio(torch_ranks, costs, b),
                "transformers LengthGroupedSampler": None
                if lgs is None
                else _step_ratio(lgs, costs, b),
                "gpubalance sampler (snake)": _step_ratio(ours, costs, b),
                "gpubalance plan (KK per step)": plan.mean_step_max_over_mean(),
                "gpubalance batch sampler (padded, budget 2x largest)": bs_ratio,
            }
        )
    return rows


def bench_packing(data: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
    rows = []
    for name, (costs, _) in data.items():
        for mult in (1.0, 4.0):
            budget = float(costs.max()) * mult
            packed = pack_micro_batches(costs, BatchConstraint(max_cost_s=budget, padding=False))
            ps = packing_stats(packed, costs, budget, padding=False)
            full = (
                packing_stats(packed[:-1], costs, budget, padding=False) if len(packed) > 1 else ps
            )
            padded = pack_micro_batches(costs, BatchConstraint(max_cost_s=budget))
            pd = packing_stats(padded, costs, budget)
            rows.append(
                {
                    "workload": name,
                    "budget_x_largest_item": mult,
                    "packed_batches": ps.batches,
                    "packed_useful": ps.useful,
                    "packed_useful_excl_last": full.useful,
                    "padded_fill": pd.fill,
                    "padded_useful": pd.useful,
                }
            )
    return rows


def _best_time(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_throughput(n: int) -> list[dict[str, Any]]:
    a = to_arrays(default_workload(n, seed=1))
    costs = MODEL.costs_s(a.input_tokens, a.output_tokens)
    k = 64
    rows = []
    small = costs[:20_000]
    for policy, target in (("lpt", 1_000_000), ("kk", 300_000)):
        part = get_partitioner(policy)
        t0 = time.perf_counter()
        part.partition(costs[:1000], k)  # JIT compile (or load the disk cache)
        warm = time.perf_counter() - t0
        t = _best_time(lambda p=part: p.partition(costs, k))
        tp = _best_time(
            lambda p=policy: get_partitioner(p, backend="python").partition(small, k), repeat=1
        )
        rows.append(
            {
                "policy": policy,
                "items": n,
                "ranks": k,
                "seconds": t,
                "items_per_s": n / t,
                "target_items_per_s": target,
                "ratio_to_target": n / t / target,
                "python_reference_items_per_s": small.shape[0] / tp,
                "speedup_vs_python": (n / t) / (small.shape[0] / tp),
                "first_call_s": warm,
            }
        )
    return rows


def bench_sampler(n: int) -> list[dict[str, Any]]:
    import torch.utils.data as tud

    costs = MODEL.costs_s(
        *(lambda a: (a.input_tokens, a.output_tokens))(to_arrays(default_workload(n, seed=2)))
    )
    b = 16
    c = BatchConstraint(max_cost_s=float(costs.max()) * 2)
    rows = []
    for k in (8, 64, 512):
        ours = CostBalancedDistributedSampler(
            costs_s=costs, num_replicas=k, rank=k - 1, batch_size=b, seed=0
        )
        t0 = time.perf_counter()
        list(ours)  # epoch 0: includes the one-off sort
        first = time.perf_counter() - t0
        ours.set_epoch(1)
        t0 = time.perf_counter()
        got = list(ours)
        t_ours = time.perf_counter() - t0
        steps = -(-len(got) // b)
        ref = tud.DistributedSampler(range(n), num_replicas=k, rank=k - 1, seed=0)
        ref.set_epoch(1)
        t0 = time.perf_counter()
        ref_items = list(ref)
        t_ref = time.perf_counter() - t0
        bs = CostBalancedBatchSampler(costs, c, num_replicas=k, rank=k - 1, seed=0)
        list(bs)  # packs once (cached)
        bs.set_epoch(1)
        t0 = time.perf_counter()
        nb = len(list(bs))
        t_bs = time.perf_counter() - t0
        rows.append(
            {
                "ranks": k,
                "items": n,
                "per_rank_batch": b,
                "steps_per_epoch": steps,
                "ours_us_per_step": t_ours / steps * 1e6,
                "ours_first_epoch_s": first,
                "torch_us_per_step": t_ref / (-(-len(ref_items) // b)) * 1e6,
                "batch_sampler_us_per_step": t_bs / max(nb, 1) * 1e6,
            }
        )
    return rows


def _table(title: str, rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    if not rows:
        return
    t = Table(title=title, title_justify="left")
    for key in rows[0]:
        t.add_column(key, justify="right")
    for r in rows:
        t.add_row(
            *[
                "-"
                if v is None
                else f"{v:.4f}"
                if isinstance(v, float) and abs(v) < 100
                else f"{v:,.0f}"
                if isinstance(v, float)
                else str(v)
                for v in r.values()
            ]
        )
    Console(width=200).print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ap.add_argument("--quick", action="store_true", help="100k items instead of 1M")
    args = ap.parse_args()
    n = 100_000 if args.quick else 1_000_000
    data = workloads()
    results = {
        "partition_makespan_over_lb": bench_partition(data),
        "step_sync_gb256_k8_mean_step_max_over_mean": bench_steps(data),
        "packing": bench_packing(data),
        "throughput": bench_throughput(n),
        "sampler_cost_per_step": bench_sampler(n),
    }
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return
    for title, rows in results.items():
        _table(title, rows)


if __name__ == "__main__":
    main()
