"""Worker process for the multi-process balance tests (run like torchrun would).

Usage: python balance_dist_worker.py MODE OUT_DIR  with RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT in the environment. MODE is ``sampler``, ``batch_sampler`` or ``queue``.
Writes OUT_DIR/rank<R>.json.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from gpubalance.balance import (
    BatchConstraint,
    CostBalancedBatchSampler,
    CostBalancedDistributedSampler,
    StoreWorkQueue,
)

N_ITEMS = 203


def costs() -> np.ndarray:
    return np.random.default_rng(42).lognormal(0, 1.0, size=N_ITEMS)


class Items(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return N_ITEMS

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.full((4,), float(i % 7)), i


def ddp_loop(loader) -> list[int]:  # type: ignore[no-untyped-def]
    """A tiny DDP loop: backward all-reduces every step, so unequal counts would hang."""
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen: list[int] = []
    for x, idx in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        seen.extend(int(i) for i in idx)
    return seen


def main() -> None:
    mode, out_dir = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    result: dict[str, object] = {"rank": rank}
    if mode == "sampler":
        sampler = CostBalancedDistributedSampler(Items(), costs_s=costs(), batch_size=5, seed=3)
        sampler.set_epoch(1)
        loader = torch.utils.data.DataLoader(Items(), batch_size=5, sampler=sampler)
        seen = ddp_loop(loader)
        gathered: list[list[int] | None] = [None] * world
        dist.all_gather_object(gathered, seen)
        result.update(seen=seen, gathered=gathered, steps=len(loader))
    elif mode == "batch_sampler":
        c = costs()
        bs = CostBalancedBatchSampler(c, BatchConstraint(max_cost_s=float(c.max()) * 3), seed=5)
        loader = torch.utils.data.DataLoader(Items(), batch_sampler=bs)
        seen = ddp_loop(loader)
        gathered = [None] * world
        dist.all_gather_object(gathered, seen)
        result.update(seen=seen, gathered=gathered, steps=len(loader))
    elif mode == "queue":
        order = np.argsort(-costs(), kind="stable")
        queue = StoreWorkQueue.from_process_group(N_ITEMS, name="t/q", items=order, min_chunk=2)
        claimed: list[int] = []
        n = queue.drain(lambda chunk: claimed.extend(int(i) for i in chunk))
        queue.add_done(n)
        dist.barrier()
        result.update(claimed=claimed, done=queue.done())
    else:
        raise SystemExit(f"unknown mode {mode}")
    dist.barrier()
    dist.destroy_process_group()
    (out_dir / f"rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
