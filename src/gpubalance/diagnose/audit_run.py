"""Run the audit: inside a torch.distributed job (gather every rank's facts with gloo) or
standalone (this process and the GPUs of this node)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpubalance.diagnose.audit import AuditReport, audit
from gpubalance.diagnose.audit_facts import RankFacts, collect_facts

__all__ = ["in_distributed_launch", "run_audit"]


def in_distributed_launch() -> bool:
    """True when torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR/PORT) are set."""
    env = os.environ
    return "WORLD_SIZE" in env and "RANK" in env and "MASTER_ADDR" in env and "MASTER_PORT" in env


def run_audit(
    *,
    gpu_pci: list[str] | None = None,
    sysfs_root: str | Path = "/",
    nvml_module: Any | None = None,
    timeout_s: float = 120.0,
) -> AuditReport | None:
    """Collect facts and audit them.

    In a distributed launch every rank calls this; facts are gathered over a gloo group
    (``all_gather_object``) and rank 0 returns the report, the other ranks None. A process
    group that is already initialised is used as it is; one created here is destroyed.
    """
    facts = collect_facts(gpu_pci=gpu_pci, sysfs_root=sysfs_root, nvml_module=nvml_module)
    if not in_distributed_launch():
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                return _gather(facts, dist, own=False)
        except ImportError:
            pass
        return audit([facts])
    import torch.distributed as dist

    own = not dist.is_initialized()
    if own:
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))
    return _gather(facts, dist, own=own)


def _gather(facts: RankFacts, dist: Any, *, own: bool) -> AuditReport | None:
    try:
        group = None
        if dist.get_backend() != "gloo":
            group = dist.new_group(backend="gloo")
        box: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(box, facts.to_dict(), group=group)
        rank = dist.get_rank()
    finally:
        if own:
            dist.destroy_process_group()
    if rank != 0:
        return None
    return audit([RankFacts(**d) for d in box])
