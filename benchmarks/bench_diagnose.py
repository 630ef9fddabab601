"""Tracer overhead at 10 ms steps: the same loop with and without PhaseTracer, in one run.

Each step does a fixed amount of CPU work calibrated to take 10 ms. The traced loop does
what a real loop does per step: a DataLoader wait through ``tracer.timed``,
``step(work=...)``, a ``compute`` phase and a timed collective (no real communication),
with the background flush thread running. Blocks of steps alternate between the two loops.

Two clocks are reported. *CPU time of the process* (``time.process_time``, all threads, so
the flush thread counts) is immune to preemption by other jobs on a shared machine and is
the headline figure; *wall time* is shown too, but on a loaded machine its noise is larger
than the effect. Also reported: the tracer's own cost per step with empty phases.

    python benchmarks/bench_diagnose.py [--steps 2000] [--json]

Target (issue 5): overhead <= 0.5 % of step time at 10 ms steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from gpubalance.diagnose.reader import read_tracer_rank
from gpubalance.diagnose.tracer import PhaseTracer

STEP_S = 0.010


def _work(k: int) -> int:
    x = 0
    for i in range(k):
        x += i
    return x


def calibrate(target_s: float) -> int:
    """Iterations of :func:`_work` taking ``target_s`` of CPU time (median of 5 tries)."""
    k = 10000
    while True:
        t0 = time.process_time()
        _work(k)
        dt = time.process_time() - t0
        if dt > 0.02:
            break
        k *= 2
    per = []
    for _ in range(5):
        t0 = time.process_time()
        _work(k)
        per.append((time.process_time() - t0) / k)
    return int(target_s / statistics.median(per))


def _loader(n: int) -> Iterator[int]:
    yield from range(n)


def plain_block(n: int, k: int) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    for item in _loader(n):
        _work(int(k * 0.8))
        _ = item
        _work(k - int(k * 0.8))
    return time.perf_counter() - w0, time.process_time() - c0


def traced_block(tr: PhaseTracer, n: int, k: int) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    for item in tr.timed(_loader(n)):
        with tr.step(work=item):
            with tr.phase("compute"):
                _work(int(k * 0.8))
            with tr.collective("all_reduce", 4096):
                _work(k - int(k * 0.8))
    return time.perf_counter() - w0, time.process_time() - c0


def empty_cost_s(tr: PhaseTracer, n: int) -> float:
    t0 = time.process_time()
    for item in tr.timed(_loader(n)):
        with tr.step(work=item):
            with tr.phase("compute"):
                pass
            with tr.collective("all_reduce", 4096):
                pass
    return (time.process_time() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=2000, help="steps per loop (x 10 ms)")
    ap.add_argument("--block", type=int, default=50, help="steps per alternating block")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    k = calibrate(STEP_S)
    with tempfile.TemporaryDirectory() as d:
        tr = PhaseTracer(Path(d), rank=0, world_size=1, run_id="bench", cuda_events=False)
        pb: list[tuple[float, float]] = []
        tb: list[tuple[float, float]] = []
        with tr:
            plain_block(10, k)  # warm up both paths
            traced_block(tr, 10, k)
            for _ in range(a.steps // a.block):
                pb.append(plain_block(a.block, k))
                tb.append(traced_block(tr, a.block, k))
            per_step_s = min(empty_cost_s(tr, 20000) for _ in range(3))
        path = Path(d) / "rank00000.gpbt"
        rt = read_tracer_rank(path)
        file_bytes = path.stat().st_size
    n = (a.steps // a.block) * a.block
    cpu_plain, cpu_traced = sum(p[1] for p in pb), sum(t[1] for t in tb)
    wall_plain, wall_traced = sum(p[0] for p in pb), sum(t[0] for t in tb)
    res = {
        "steps": n,
        "step_s": STEP_S,
        "cpu_plain_mean_step_s": cpu_plain / n,
        "cpu_traced_mean_step_s": cpu_traced / n,
        "overhead_cpu": cpu_traced / cpu_plain - 1.0,
        "overhead_cpu_median_paired": statistics.median(
            t[1] / p[1] for t, p in zip(tb, pb, strict=True)
        )
        - 1.0,
        "wall_plain_mean_step_s": wall_plain / n,
        "wall_traced_mean_step_s": wall_traced / n,
        "overhead_wall": wall_traced / wall_plain - 1.0,
        "tracer_cost_per_step_us": per_step_s * 1e6,
        "tracer_cost_share_of_10ms": per_step_s / STEP_S,
        "steps_in_file": int(rt.steps.size),
        "file_bytes_per_step": file_bytes / max(rt.steps.size, 1),
        "target_overhead": 0.005,
    }
    if a.json:
        print(json.dumps(res, indent=2))
        return
    rows = [
        ("steps per loop (10 ms of CPU work each)", f"{n}"),
        ("CPU time per step, no tracer (ms)", f"{cpu_plain / n * 1e3:.4f}"),
        ("CPU time per step, with tracer (ms)", f"{cpu_traced / n * 1e3:.4f}"),
        ("overhead (CPU), traced / plain - 1", f"{res['overhead_cpu']:.4%}"),
        ("overhead (CPU), median of paired blocks", f"{res['overhead_cpu_median_paired']:.4%}"),
        ("wall per step, no tracer (ms)", f"{wall_plain / n * 1e3:.4f}"),
        ("wall per step, with tracer (ms)", f"{wall_traced / n * 1e3:.4f}"),
        ("overhead (wall; noisy when shared)", f"{res['overhead_wall']:.4%}"),
        ("tracer cost per step, empty phases (us)", f"{per_step_s * 1e6:.2f}"),
        ("  = share of a 10 ms step", f"{per_step_s / STEP_S:.4%}"),
        ("file bytes per step (5 records)", f"{res['file_bytes_per_step']:.1f}"),
        ("target", "<= 0.5 %"),
    ]
    print(f"{'measure':<46}{'value':>14}")
    for name, val in rows:
        print(f"{name:<46}{val:>14}")


if __name__ == "__main__":
    main()
