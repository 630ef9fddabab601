"""Analysis at scale: 64 ranks x 10,000 steps of tracer files, read and analysed.

Writes synthetic per-rank tracer files (5 records per step: a data wait before the step, a
compute phase, an all-reduce, the step, the work cost) with a persistent input straggler,
an occasional compute straggler and an outlier step, then runs ``load_traces`` + ``analyze``
in a fresh process and reports its wall time and peak resident memory (ru_maxrss), beside
the same analysis on 8 ranks (the baseline the scaling is compared with).

    python benchmarks/bench_diagnose_scale.py [--ranks 64] [--steps 10000] [--json]

Targets (issue 5): < 10 s and < 2 GB for 64 ranks x 10,000 steps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gpubalance.diagnose.format import (
    CAT_COMPUTE,
    CAT_DATA,
    CAT_SYNC,
    KIND_COLL,
    KIND_PHASE,
    KIND_STEP,
    KIND_WORK,
    RECORD_DTYPE,
    name_record,
    write_trace_file,
)

MS = 1_000_000


def write_run(out: Path, ranks: int, steps: int, seed: int = 0) -> None:
    """Synthetic run: rank 5 waits 4 ms longer for input every step; rank 9 computes 6 ms
    longer in 3 % of steps; step 777 is 200 ms long on rank 2."""
    rng = np.random.default_rng(seed)
    s = np.arange(steps)
    for r in range(ranks):
        data = 1.0 + rng.gamma(4.0, 0.05, steps) + (4.0 if r == 5 % ranks else 0.0)
        work = rng.uniform(900, 1100, steps)
        comp = 0.008 * work + rng.normal(0, 0.05, steps)
        if r == 9 % ranks:
            comp[s % 33 == 0] += 6.0
        if r == 2:
            comp[777 % steps] += 200.0
        busy = data + comp
        recs = np.zeros(steps * 5 + 3, dtype=RECORD_DTYPE)
        recs[:3] = [
            name_record(1, "data", CAT_DATA),
            name_record(2, "compute", CAT_COMPUTE),
            name_record(3, "all_reduce", CAT_SYNC),
        ]
        body = recs[3:].reshape(steps, 5)
        t = (s * 30 * MS).astype(np.int64)
        data_ns = (data * MS).astype(np.int64)
        comp_ns = (comp * MS).astype(np.int64)
        sync_ns = ((26.0 - busy).clip(0.2) * MS).astype(np.int64)
        for j, (kind, nid, depth, start, dur, val) in enumerate(
            [
                (KIND_PHASE, 1, 0, t, data_ns, 0.0),
                (KIND_PHASE, 2, 1, t + data_ns, comp_ns, 0.0),
                (KIND_COLL, 3, 1, t + data_ns + comp_ns, sync_ns, 4.0e6),
                (KIND_STEP, 0, 0, t + data_ns, comp_ns + sync_ns, 0.0),
                (KIND_WORK, 0, 0, 0, 0, work),
            ]
        ):
            body[:, j]["step"] = s
            body[:, j]["name_id"] = nid
            body[:, j]["kind"] = kind
            body[:, j]["depth"] = depth
            body[:, j]["start_ns"] = start
            body[:, j]["dur_ns"] = dur
            body[:, j]["value"] = val
        hdr = {
            "run_id": "scale",
            "rank": r,
            "world_size": ranks,
            "host": f"node{r // 8}",
            "start_unix_ns": 1_700_000_000 * 10**9,
            "version": 1,
        }
        write_trace_file(out / f"rank{r:05d}.gpbt", hdr, recs)


CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from gpubalance.diagnose.load import load_traces
from gpubalance.diagnose.analyzer import analyze
ts = load_traces(sys.argv[1])
t1 = time.perf_counter()
d = analyze(ts)
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "analyze_s": t2 - t1, "total_s": t2 - t0,
  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
  "findings": [(f.kind, f.rank, f.phase) for f in d.findings]}))
"""


def measure(ranks: int, steps: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        write_run(Path(d), ranks, steps)
        gen_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in Path(d).iterdir())
        out = subprocess.run(
            [sys.executable, "-c", CHILD, d], capture_output=True, text=True, check=True
        )
    res = json.loads(out.stdout)
    res.update({"ranks": ranks, "steps": steps, "files_bytes": size, "generate_s": gen_s})
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    base = measure(8, a.steps)
    big = measure(a.ranks, a.steps)
    if a.json:
        print(json.dumps({"baseline": base, "target": big}, indent=2))
        return
    print(
        f"{'ranks x steps':<16}{'files MB':>10}{'load s':>9}{'analyze s':>11}{'total s':>9}"
        f"{'peak RSS MB':>13}"
    )
    for r in (base, big):
        print(
            f"{r['ranks']:>5} x {r['steps']:<8}{r['files_bytes'] / 1e6:>10.1f}"
            f"{r['load_s']:>9.2f}{r['analyze_s']:>11.2f}{r['total_s']:>9.2f}"
            f"{r['peak_rss_bytes'] / 2**20:>13.0f}"
        )
    print(
        f"ratio total time {big['ranks']}/{base['ranks']} ranks: "
        f"{big['total_s'] / base['total_s']:.2f}x for {big['ranks'] / base['ranks']:.0f}x data"
    )
    print("targets: < 10 s, < 2048 MB;  findings:", big["findings"][:4])


if __name__ == "__main__":
    main()
