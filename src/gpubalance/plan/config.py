"""What the user asks the planner for, validated (the CLI builds this from its flags).

Defaults are those of ``gpubalance plan`` with no arguments: Llama-3.1-8B at bf16, the
embedded default workload profile (Azure code trace 2023 lengths) with Poisson arrivals at
20 req/s, p99 TTFT <= 2 s and p99 end-to-end <= 20 s, 5 % monthly growth for 12 months,
every GPU in the catalog, a spare node so the SLA survives one node failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpubalance.plan.sla import Sla

__all__ = ["DEFAULT_MODEL", "DEFAULT_RATE_RPS", "PlanRequest"]

#: Default model of ``gpubalance plan``.
DEFAULT_MODEL = "llama-3.1-8b"
#: Default arrival rate: 20 req/s (about 8x the default profile's 2.6 req/s), enough load
#: that one GPU of any type cannot carry it and the choice of GPU type and node size matters.
DEFAULT_RATE_RPS = 20.0


class PlanRequest(BaseModel):
    """A planning request (every field has a default: no arguments is a valid plan)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(
        default=DEFAULT_MODEL,
        description="Model catalog name (any case, aliases) or a local HF config.json path.",
    )
    precision: str = Field(default="bf16", description="Weight precision: bf16, fp16, fp8, ...")
    rate_rps: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Today's arrival rate, req/s (default 20, or the trace's own rate).",
    )
    trace: Path | None = Field(
        default=None, description="Trace file (Azure CSV or JSONL) instead of the profile."
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Replay the trace this many times faster (ignored with rate_rps).",
    )
    arrivals: Literal["poisson", "profile"] = Field(
        default="poisson",
        description="Generated arrivals: Poisson, or the profile's burstiness (gamma gaps).",
    )
    requests: int = Field(
        default=4000, ge=200, le=1_000_000, description="Requests per simulation."
    )
    seed: int = Field(default=0, description="Seed of the generated workload and the router.")
    sla: Sla = Field(default_factory=Sla, description="Latency objectives.")
    growth_monthly: float = Field(
        default=0.05, gt=-1, le=10, allow_inf_nan=False, description="Monthly load growth."
    )
    months: int = Field(default=12, ge=0, le=120, description="Planning horizon, months.")
    gpus: list[str] | None = Field(
        default=None, description="GPU types to consider (default: the whole catalog)."
    )
    node_sizes: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8], description="GPUs-per-node options."
    )
    price_file: Path | None = Field(default=None, description="Price file (YAML).")
    catalog: Path | None = Field(default=None, description="GPU catalog file merged over ours.")
    models_file: Path | None = Field(default=None, description="Model catalog file.")
    efficiency: Path | None = Field(
        default=None,
        description="Roofline efficiency profile (YAML/JSON from `gpubalance calibrate --model "
        "roofline`) applied to every GPU's replica model.",
    )
    spare_node: bool = Field(
        default=True, description="Size fleets to meet the SLA with one node down."
    )
    prune: bool = Field(
        default=True,
        description="Skip simulating shapes whose analytic lower-bound cost exceeds the best.",
    )
    policy: str = Field(default="least_cost", description="Routing policy of the fleet.")
    max_replicas: int = Field(default=512, ge=1, description="Largest fleet the search tries.")

    @model_validator(mode="after")
    def _check(self) -> PlanRequest:
        if self.sla.bounds() == []:
            raise ValueError("the SLA sets no bound: give at least one of the TTFT/e2e limits")
        if any(n not in (1, 2, 4, 8, 16) for n in self.node_sizes) or not self.node_sizes:
            raise ValueError("node sizes must be among 1, 2, 4, 8, 16")
        return self
