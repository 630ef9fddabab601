"""Balancing work across ranks by cost (layer 2).

Partitioners (count baseline, LPT, Karmarkar–Karp), balance metrics, budgeted bucketed
micro-batches, step-synchronous plans, PyTorch samplers and pull-based work queues.
numba kernels are compiled on first use, never at import; torch is imported lazily.
"""

from gpubalance.balance.batching import (
    BatchConstraint,
    PackingStats,
    StepPlan,
    balanced_step_plan,
    count_step_plan,
    pack_micro_batches,
    packing_stats,
)
from gpubalance.balance.metrics import BalanceMetrics, balance_metrics, makespan_lower_bound
from gpubalance.balance.partition import (
    PARTITIONERS,
    CountPartitioner,
    KarmarkarKarpPartitioner,
    LptPartitioner,
    Partition,
    Partitioner,
    get_partitioner,
)
from gpubalance.balance.queue import StoreWorkQueue, ThreadWorkQueue, WorkQueue, guided_bounds
from gpubalance.balance.sampler import CostBalancedBatchSampler, CostBalancedDistributedSampler

__all__ = [
    "PARTITIONERS",
    "BalanceMetrics",
    "BatchConstraint",
    "CostBalancedBatchSampler",
    "CostBalancedDistributedSampler",
    "CountPartitioner",
    "KarmarkarKarpPartitioner",
    "LptPartitioner",
    "PackingStats",
    "Partition",
    "Partitioner",
    "StepPlan",
    "StoreWorkQueue",
    "ThreadWorkQueue",
    "WorkQueue",
    "balance_metrics",
    "balanced_step_plan",
    "count_step_plan",
    "get_partitioner",
    "guided_bounds",
    "makespan_lower_bound",
    "pack_micro_batches",
    "packing_stats",
]
