"""Findings: what is wrong, on which rank and phase, the evidence and the guide's fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FIXES", "Finding"]

# The troubleshooting guide's remedies, keyed by cause.
FIXES: dict[str, str] = {
    "input_wait": (
        "Steady the input pipeline on this rank: more DataLoader workers and prefetch, "
        "pin_memory, keep hot data on the node's local disk, separate metadata reads from "
        "bulk transfers, and pin worker placement (check with `gpubalance audit`)."
    ),
    "count_partitioning": (
        "Count-based partitioning: batches equal in count are not equal in cost. Balance by "
        "cost: use gpubalance's CostBalancedDistributedSampler (cost-balanced sampling: "
        "`from gpubalance.balance import CostBalancedDistributedSampler`, "
        "`CostBalancedDistributedSampler(dataset, costs_s=per_item_cost_s, seed=0)`) or "
        "token-budget batching."
    ),
    "slow_compute": (
        "This rank computes more slowly at the same work: check its GPU clocks, power and "
        "temperature (`gpubalance monitor`), its CPU affinity and NUMA placement "
        "(`gpubalance audit`), and other processes on the device."
    ),
    "untraced_stall": (
        "Time outside the traced phases (e.g. a stall before the collective): wrap the gap "
        "in tracer.phase() to name it; look for host-side work only this rank does (logging, "
        "checkpointing, evaluation, garbage collection, an extra barrier)."
    ),
    "sync_wait": (
        "Time at collectives is spent waiting for the slowest rank: fix that rank's cause "
        "(findings above), then cut needless sync points and overlap communication with "
        "compute."
    ),
    "slow_link": (
        "This rank's collectives are slow although it arrives on time: test the fabric on its "
        "own with `gpubalance collectives`, check its NIC/NVLink path and that NCCL_* "
        "settings match (`gpubalance audit`)."
    ),
    "slow_host": (
        "Every rank on this host is slow: check the node (thermal throttling, clocks, noisy "
        "neighbours, local storage, network) and compare it with `gpubalance audit`."
    ),
    "outlier_steps": (
        "Rare very slow steps: look for periodic work (checkpoints, evaluation, logging, "
        "garbage collection) and reduce variance in batch cost."
    ),
}


@dataclass
class Finding:
    """One ranked finding.

    ``lost_s`` is the job's wall-clock time attributed to this cause over the analysed
    steps (seconds); ``rank`` is the rank at fault (None when it concerns several) and
    ``phase`` one of data / compute / sync / other / step.
    """

    kind: str
    title: str
    rank: int | None
    host: str | None
    phase: str
    lost_s: float
    evidence: dict[str, Any]
    fix: str
    persistence: str = ""  # "persistent" / "occasional" / ""
    ranks: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
