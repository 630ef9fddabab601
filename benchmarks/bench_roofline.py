"""Speed of the roofline performance model, the hot call of the serving simulator.

The simulator calls ``RooflineModel.iteration_time_s`` once per continuous-batching
iteration of every replica (millions of calls per ``gpubalance plan``), so it must cost
about what the simplest cost model costs. Peer: ``TokenCostModel.cost_s`` (four
multiply-adds, the cheapest core cost model). Also timed: ``cost_s`` in closed form
against summing one ``iteration_time_s`` per decode step (the obvious loop), and the
vectorised ``costs_s`` per request. The machine is shared: compare the ratios.

    python benchmarks/bench_roofline.py [--json] [--calls 300000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np

from gpubalance.cost import RooflineModel, TokenCostModel


def _best_rate(fn: Callable[[], int], repeats: int = 5) -> float:
    """Best-of-``repeats`` operations per second; ``fn`` returns the operations it did."""
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = fn()
        dt = time.perf_counter() - t0
        best = max(best, n / dt)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--calls", type=int, default=300_000, help="calls per timing run")
    args = ap.parse_args()
    n = args.calls

    rng = np.random.default_rng(0)
    pre = rng.integers(0, 2048, size=n).tolist()
    seqs = rng.integers(0, 128, size=n).tolist()
    ctx = [s * int(c) for s, c in zip(seqs, rng.integers(200, 3000, size=n), strict=True)]
    pairs = [float(p) * (p + 500) for p in pre]
    inp = rng.integers(1, 4000, size=n).tolist()
    out = rng.integers(1, 800, size=n).tolist()

    rm = RooflineModel.from_names("H100", "llama-3.1-8b")
    rm_tp = RooflineModel.from_names("H100", "llama-3.1-70b", tp=4)
    rm_moe = RooflineModel.from_names("H100", "mixtral-8x7b", "fp8", tp=2)
    tok = TokenCostModel(
        overhead_s=0.01,
        prefill_s_per_token=1e-4,
        prefill_s_per_token2=1e-9,
        decode_s_per_token=0.01,
    )

    def run_iter(model: RooflineModel) -> Callable[[], int]:
        f = model.iteration_time_s

        def go() -> int:
            for a, b, c, d in zip(pre, pairs, seqs, ctx, strict=True):
                f(a, b, c, d)
            return n

        return go

    def run_token() -> int:
        f = tok.cost_s
        for a, b in zip(inp, out, strict=True):
            f(a, b)
        return n

    m = n // 100

    def run_cost_closed() -> int:
        f = rm.cost_s
        for a, b in zip(inp[:m], out[:m], strict=True):
            f(a, b)
        return m

    def run_cost_loop() -> int:
        f = rm.iteration_time_s
        for a, b in zip(inp[:m], out[:m], strict=True):
            f(a, float(a) * a, 0, 0)
            for k in range(1, b):
                f(0, 0.0, 1, a + k)
        return m

    inp_np, out_np = np.asarray(inp), np.asarray(out)

    def run_vec() -> int:
        rm.costs_s(inp_np, out_np)
        return n

    peer = _best_rate(run_token)
    rows = [
        ("TokenCostModel.cost_s (peer)", peer, 1.0),
    ]
    for label, model in [
        ("iteration_time_s 8B tp1", rm),
        ("iteration_time_s 70B tp4", rm_tp),
        ("iteration_time_s Mixtral fp8 tp2", rm_moe),
    ]:
        r = _best_rate(run_iter(model))
        rows.append((label, r, r / peer))
    loop = _best_rate(run_cost_loop, repeats=2)
    closed = _best_rate(run_cost_closed)
    rows.append(("cost_s by summing iterations (loop)", loop, loop / peer))
    rows.append(("cost_s closed form", closed, closed / peer))
    vec = _best_rate(run_vec)
    rows.append(("costs_s vectorised (per request)", vec, vec / peer))

    if args.json:
        print(
            json.dumps(
                [{"case": c, "ops_per_s": r, "ratio_vs_peer": q} for c, r, q in rows], indent=2
            )
        )
        return
    print(f"{'case':<40}{'calls/s':>14}{'vs peer':>10}")
    for c, r, q in rows:
        print(f"{c:<40}{r:>14,.0f}{q:>10.2f}")
    print(f"closed-form cost_s is {closed / loop:,.0f}x the per-step loop")


if __name__ == "__main__":
    main()
