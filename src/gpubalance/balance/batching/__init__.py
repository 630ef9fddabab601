"""Budgeted, bucketed micro-batches and step-synchronous plans for data-parallel loops."""

from gpubalance.balance.batching.constraint import BatchConstraint
from gpubalance.balance.batching.pack import (
    PackingStats,
    equalize_batch_count,
    pack_micro_batches,
    packing_stats,
)
from gpubalance.balance.batching.step_sync import (
    StepPlan,
    balanced_step_order,
    balanced_step_plan,
    count_step_plan,
    split_step,
)

__all__ = [
    "BatchConstraint",
    "PackingStats",
    "StepPlan",
    "balanced_step_order",
    "balanced_step_plan",
    "count_step_plan",
    "equalize_batch_count",
    "pack_micro_batches",
    "packing_stats",
    "split_step",
]
