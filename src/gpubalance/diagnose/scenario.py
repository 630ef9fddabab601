"""A small traced data-parallel job with injectable faults (gloo on CPU).

Run under torchrun or :func:`gpubalance.diagnose.launch.launch_local`::

    python -m gpubalance.diagnose.scenario --out traces/ --steps 60 --inject slow-input --bad-rank 1

Each step every rank takes ``items`` items from a loader, "computes" for a time
proportional to their cost (``--step-ms`` at the mean cost; a sleep, as a GPU kernel would
leave the host idle) and all-reduces a gradient tensor. Faults (``--inject``):

- ``slow-input``: the bad rank's loader takes ``--fault-ms`` longer per step;
- ``heavy-items``: count-based sampling hands the bad rank items ``--heavy-factor`` times as
  costly (equal count, unequal cost);
- ``slow-compute``: the bad rank computes ``--heavy-factor`` times slower at equal work;
- ``stall``: the bad rank stalls ``--fault-ms`` right before the collective (untraced);
- ``none``: a balanced job.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import numpy as np

from gpubalance.diagnose.tracer import PhaseTracer

__all__ = ["main"]

INJECTIONS = ("none", "slow-input", "heavy-items", "slow-compute", "stall")


def _loader(
    n_steps: int, items: int, rng: np.random.Generator, heavy: float, delay_s: float
) -> Iterator[np.ndarray]:
    for _ in range(n_steps):
        time.sleep(0.001 + delay_s)
        yield rng.uniform(0.5, 1.5, size=items) * heavy


def main(argv: list[str] | None = None) -> None:
    """Entry point of one worker."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--inject", choices=INJECTIONS, default="none")
    ap.add_argument("--bad-rank", type=int, default=1)
    ap.add_argument("--fault-ms", type=float, default=25.0)
    ap.add_argument("--heavy-factor", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run-id", default=None)
    a = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    bad = rank == a.bad_rank
    rng = np.random.default_rng(a.seed + rank)
    heavy = a.heavy_factor if bad and a.inject == "heavy-items" else 1.0
    slow = a.heavy_factor if bad and a.inject == "slow-compute" else 1.0
    delay_s = a.fault_ms / 1e3 if bad and a.inject == "slow-input" else 0.0
    stall_s = a.fault_ms / 1e3 if bad and a.inject == "stall" else 0.0
    per_cost_s = a.step_ms / 1e3 / a.items
    grad = torch.ones(4096)
    tracer = PhaseTracer(a.out, run_id=a.run_id, flush_interval_s=0.2)
    with tracer:
        for costs in tracer.timed(_loader(a.steps, a.items, rng, heavy, delay_s)):
            work = float(costs.sum())
            with tracer.step(work=work):
                with tracer.phase("compute"):
                    time.sleep(work * per_cost_s * slow)
                if stall_s:
                    time.sleep(stall_s)
                tracer.dist.all_reduce(grad)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    main()
