"""Compare partition policies on one workload: the analysis behind ``gpubalance partition``.

For each policy it reports the global partition (every item placed once on a rank:
per-rank cost, makespan / lower bound, max / mean, CV) and the step-synchronous plan of
a data-parallel loop with ``global_batch`` items per step (mean over steps of the
per-step max / mean rank cost). ``count`` is the baseline: torch's DistributedSampler
(padded round robin; shuffled with the seed for the step plan). Returns data only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpubalance.balance.batching.constraint import BatchConstraint
from gpubalance.balance.batching.pack import PackingStats, packing_stats
from gpubalance.balance.batching.step_sync import StepPlan, balanced_step_plan, count_step_plan
from gpubalance.balance.metrics import BalanceMetrics
from gpubalance.balance.partition.registry import PARTITIONERS, get_partitioner

__all__ = ["ComparisonConfig", "PolicyResult", "compare_policies"]


class ComparisonConfig(BaseModel):
    """What to compare (validated CLI flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ranks: int = Field(ge=1, description="Number of ranks k to split the work across.")
    policies: tuple[str, ...] = Field(
        default=("count", "lpt", "kk"), min_length=1, description="Partition policies to run."
    )
    global_batch: int | None = Field(
        default=None,
        ge=1,
        description="Items per data-parallel step across all ranks (multiple of ranks); "
        "default 32 x ranks.",
    )
    equal_counts: bool = Field(
        default=False, description="Global partition gives every rank the same item count."
    )
    budget_s: float | None = Field(
        default=None, gt=0, description="Micro-batch padded cost budget, seconds."
    )
    budget_tokens: float | None = Field(
        default=None, gt=0, description="Micro-batch padded token budget (input + output)."
    )
    seed: int = Field(default=0, description="Seed for shuffling and tie order.")

    @model_validator(mode="after")
    def _check(self) -> ComparisonConfig:
        for p in self.policies:
            PARTITIONERS.get(p)  # unknown names: UserInputError with a suggestion
        gb = self.effective_global_batch
        if gb % self.ranks:
            raise ValueError(f"global_batch {gb} must be a multiple of ranks {self.ranks}")
        return self

    @property
    def effective_global_batch(self) -> int:
        """The global batch in items (default 32 per rank)."""
        return self.global_batch if self.global_batch is not None else 32 * self.ranks

    def constraint(self) -> BatchConstraint | None:
        """The micro-batch constraint, or None without a budget."""
        if self.budget_s is None and self.budget_tokens is None:
            return None
        return BatchConstraint(max_cost_s=self.budget_s, max_tokens=self.budget_tokens)


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy's figures.

    Attributes:
        policy: policy name.
        metrics: global partition metrics (per-rank costs in seconds).
        rank_counts: items (placements) per rank in the global partition.
        step_max_over_mean: mean over steps of per-step max / mean rank cost.
        step_worst: worst step's max / mean.
        step_time_over_ideal: sum of per-step slowest rank / sum of per-step mean rank.
        steps: number of steps.
        microbatches_per_step: mean micro-batches per rank per step (1 without a budget).
        packing: micro-batch packing statistics against the cost budget (None without one).
    """

    policy: str
    metrics: BalanceMetrics
    rank_counts: tuple[int, ...]
    step_max_over_mean: float
    step_worst: float
    step_time_over_ideal: float
    steps: int
    microbatches_per_step: float
    packing: PackingStats | None

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON form (keys stable for scripts)."""
        m = self.metrics
        return {
            "policy": self.policy,
            "ranks": m.ranks,
            "makespan_s": m.makespan_s,
            "lower_bound_s": m.lower_bound_s,
            "makespan_over_lower_bound": m.makespan_over_lower_bound,
            "max_over_mean": m.max_over_mean,
            "cv": m.cv,
            "rank_costs_s": list(m.rank_costs_s),
            "rank_counts": list(self.rank_counts),
            "step_max_over_mean": self.step_max_over_mean,
            "step_worst_max_over_mean": self.step_worst,
            "step_time_over_ideal": self.step_time_over_ideal,
            "steps": self.steps,
            "microbatches_per_step": self.microbatches_per_step,
            "packing_useful": None if self.packing is None else self.packing.useful,
            "packing_fill": None if self.packing is None else self.packing.fill,
        }


def _plan(
    policy: str,
    costs: np.ndarray,
    tokens: np.ndarray,
    cfg: ComparisonConfig,
    constraint: BatchConstraint | None,
) -> StepPlan:
    gb = cfg.effective_global_batch
    if policy == "count":
        return count_step_plan(
            costs, cfg.ranks, gb, seed=cfg.seed, constraint=constraint, tokens=tokens
        )
    return balanced_step_plan(
        costs, cfg.ranks, gb, policy=policy, seed=cfg.seed, constraint=constraint, tokens=tokens
    )


def compare_policies(
    costs_s: np.ndarray,
    tokens: np.ndarray,
    cfg: ComparisonConfig,
    *,
    on_done: Callable[[str], None] | None = None,
) -> list[PolicyResult]:
    """Run every policy of ``cfg`` on items with costs ``costs_s`` (s) and lengths ``tokens``.

    ``on_done(policy)`` is called after each policy (e.g. to advance a progress bar).
    """
    costs = np.asarray(costs_s, dtype=np.float64)
    constraint = cfg.constraint()
    if constraint is not None:
        constraint.check_items_fit(costs, tokens)
    out: list[PolicyResult] = []
    for policy in cfg.policies:
        part = get_partitioner(policy, equal_counts=cfg.equal_counts).partition(costs, cfg.ranks)
        plan = _plan(policy, costs, tokens, cfg, constraint)
        ratios = plan.step_max_over_mean()
        packing = None
        if constraint is not None and constraint.max_cost_s is not None:
            batches = [b for step in plan.steps for rank in step for b in rank]
            packing = packing_stats(batches, costs, constraint.max_cost_s)
        out.append(
            PolicyResult(
                policy=policy,
                metrics=part.metrics(),
                rank_counts=tuple(int(c) for c in part.rank_counts()),
                step_max_over_mean=float(ratios.mean()),
                step_worst=float(ratios.max()),
                step_time_over_ideal=plan.step_time_over_ideal(),
                steps=len(plan.steps),
                microbatches_per_step=float(plan.microbatch_counts().mean()),
                packing=packing,
            )
        )
        if on_done is not None:
            on_done(policy)
    return out
