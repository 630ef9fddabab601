"""The planner's output: candidates (one per shape), the recommendation and its reasons.

Plain dataclasses; :func:`gpubalance.report.plan.plan_to_dict` turns them into JSON and
the report module renders tables and HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpubalance.plan.backend import LatencySamples, ReplicaFit
from gpubalance.plan.failure import FailureDomain
from gpubalance.plan.pricing import FleetCost
from gpubalance.plan.shapes import Shape
from gpubalance.plan.sla import LatencySummary, Sla

__all__ = ["Candidate", "CandidateStatus", "PlanInputsSummary", "PlanResult", "PlanStats"]

#: ``ok``: sized and simulated; ``infeasible``: no fleet up to the search cap meets the SLA;
#: ``pruned``: its analytic lower-bound cost already exceeds a sized candidate's cost.
CandidateStatus = Literal["ok", "infeasible", "pruned"]


@dataclass(slots=True)
class Candidate:
    """One shape, sized to meet the SLA now and after growth, priced, with failure domain.

    Attributes:
        shape: GPU type, GPUs per node, TP degree.
        status: see :data:`CandidateStatus`.
        fit: memory check of one replica.
        price_gpu_hour_usd / price_source: GPU price used.
        replicas_now / replicas_growth: smallest replica counts meeting the SLA at today's
            load and at the projected load (None unless ``status == "ok"``).
        nodes_now: nodes needed today; ``nodes_min``: nodes needed at the projected load;
        ``nodes``: nodes deployed: ``nodes_min`` plus a spare node when the plan asks for
            one-node-down safety and rounding does not already give it.
        cost: monthly cost of the deployed fleet; ``min_month_usd``: cost of ``nodes_min``.
        usd_per_million_tokens_now / _growth: monthly cost over tokens served in a month.
        latency_now / latency_growth: the deployed fleet simulated at today's / projected load.
        latency_one_down_now / _growth: the fleet with one node down (None for 1 node, or
            when not simulated).
        failure: failure-domain figures.
        one_node_down_simulated: the one-node-down answers in ``failure`` come from
            simulating the fleet less one node (top candidates); otherwise from the minimal
            replica counts the search found (the SLA holds iff the replicas left are at
            least that many).
        rps_per_gpu_growth: projected req/s over deployed GPUs.
        best_latency: for infeasible shapes, the latency of the largest fleet tried.
        note: why infeasible or pruned.
    """

    shape: Shape
    status: CandidateStatus
    fit: ReplicaFit
    price_gpu_hour_usd: float
    price_source: str = ""
    replicas_now: int | None = None
    replicas_growth: int | None = None
    nodes_now: int | None = None
    nodes_min: int | None = None
    nodes: int | None = None
    cost: FleetCost | None = None
    min_month_usd: float | None = None
    usd_per_million_tokens_now: float | None = None
    usd_per_million_tokens_growth: float | None = None
    latency_now: LatencySummary | None = None
    latency_growth: LatencySummary | None = None
    latency_one_down_now: LatencySummary | None = None
    latency_one_down_growth: LatencySummary | None = None
    failure: FailureDomain | None = None
    rps_per_gpu_growth: float | None = None
    lower_bound_month_usd: float | None = None
    one_node_down_simulated: bool = False
    best_latency: LatencySummary | None = None
    best_replicas_tried: int | None = None
    note: str = ""

    @property
    def meets_sla_now(self) -> bool:
        """The deployed fleet meets the SLA at today's load."""
        return self.status == "ok"

    @property
    def meets_sla_growth(self) -> bool:
        """The deployed fleet meets the SLA at the projected load."""
        return self.status == "ok"

    @property
    def spare_nodes(self) -> int | None:
        """Nodes beyond the minimum, kept so one node can fail."""
        return None if self.nodes is None or self.nodes_min is None else self.nodes - self.nodes_min

    @property
    def gpus_total(self) -> int | None:
        """GPUs in the deployed fleet."""
        return None if self.nodes is None else self.nodes * self.shape.gpus_per_node

    @property
    def month_usd(self) -> float | None:
        """Monthly cost of the deployed fleet."""
        return None if self.cost is None else self.cost.month_usd


@dataclass(frozen=True, slots=True)
class PlanInputsSummary:
    """What the plan was made for (echoed in every report)."""

    model: str
    precision: str
    workload: str
    rate_now_rps: float
    growth_monthly: float
    months: int
    rate_growth_rps: float
    sla: Sla
    requests_per_simulation: int
    mean_input_tokens: float
    mean_output_tokens: float
    hours_per_month: float
    spare_node: bool


@dataclass(slots=True)
class PlanStats:
    """Work done: simulations run, simulated requests, wall time (seconds)."""

    simulations: int = 0
    cache_hits: int = 0
    simulated_requests: int = 0
    wall_s: float = 0.0

    @property
    def simulated_requests_per_s(self) -> float:
        """Simulated requests per second of wall time."""
        return self.simulated_requests / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(slots=True)
class PlanResult:
    """Everything the planner found."""

    inputs: PlanInputsSummary
    candidates: list[Candidate]
    dropped: list[ReplicaFit]
    recommendation: Candidate | None
    runner_up: Candidate | None
    explanation: list[str]
    stats: PlanStats
    samples: dict[str, LatencySamples] = field(default_factory=dict)
