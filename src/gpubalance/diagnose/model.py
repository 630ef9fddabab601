"""Per-rank timing data shared by the readers and the analyzer.

Times are seconds (float64). ``cat_s[:, c]`` holds the time a rank spent per step in
category ``c`` of :data:`gpubalance.diagnose.format.CATEGORIES` (data, compute, sync, other),
counting only top-level phases; ``other`` is the step's wall time not covered by data,
compute or sync phases (custom phases and untraced time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["RankTrace", "TraceSet"]


@dataclass
class RankTrace:
    """One rank's steps, as read from one file."""

    rank: int
    host: str
    run_id: str
    world_size: int
    source: str
    steps: np.ndarray  # (S,) int64 step indices, sorted, unique
    start_s: np.ndarray  # (S,) step start, unix seconds
    wall_s: np.ndarray  # (S,) step wall time incl. phases recorded just before the step
    cat_s: np.ndarray  # (S, 4) seconds per category
    work: np.ndarray  # (S,) work cost per step (NaN when not recorded)
    gpu_s: np.ndarray  # (S,) GPU time from CUDA events (NaN when not recorded)
    collectives: dict[str, float] = field(default_factory=dict)  # name -> total seconds
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class TraceSet:
    """All readable ranks of one run, aligned on the steps every rank recorded.

    Arrays are indexed ``[rank_index, step_index]``; ``ranks[i]`` is the rank number of
    row ``i``.
    """

    run_id: str
    ranks: np.ndarray  # (R,) int
    hosts: list[str]
    steps: np.ndarray  # (S,) step indices common to all ranks
    start_s: np.ndarray  # (R, S)
    wall_s: np.ndarray  # (R, S)
    cat_s: np.ndarray  # (R, S, 4)
    work: np.ndarray  # (R, S)
    gpu_s: np.ndarray  # (R, S)
    world_size: int
    sources: list[str]
    collectives: list[dict[str, float]]
    problems: list[str] = field(default_factory=list)
    nvml: dict[int, dict[str, float]] = field(default_factory=dict)  # rank -> telemetry means

    @property
    def n_ranks(self) -> int:
        return int(self.ranks.size)

    @property
    def n_steps(self) -> int:
        return int(self.steps.size)
