"""The validated configuration of one ``gpubalance loadtest`` invocation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpubalance.loadtest.endpoint import Endpoint
from gpubalance.loadtest.goodput import Sla

__all__ = ["LoadTestConfig", "Mode"]

Mode = Literal["rate", "concurrency", "trace", "goodput"]


class LoadTestConfig(BaseModel):
    """What to send, how fast, and for how long."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: Endpoint = Field(description="Target endpoint and request options.")
    mode: Mode = Field(description="rate (open loop), concurrency (closed loop), trace, goodput.")
    shape: Literal["constant", "poisson", "gamma"] = Field(
        default="poisson", description="Arrival process for rate and goodput modes."
    )
    gamma_cv: float = Field(default=2.0, gt=0, description="Gap CV for gamma arrivals.")
    rates_rps: tuple[float, ...] = Field(default=(), description="Offered rates (sweep if >1).")
    concurrencies: tuple[int, ...] = Field(default=(), description="Closed-loop levels.")
    requests: int | None = Field(default=None, ge=1, description="Requests per run.")
    duration_s: float | None = Field(default=None, gt=0, description="Seconds per run.")
    input_tokens: int = Field(default=256, ge=1, description="Mean prompt tokens.")
    output_tokens: int = Field(default=128, ge=0, description="Mean answer tokens.")
    token_spread: float = Field(
        default=0.0, ge=0, lt=1, description="Uniform relative spread of token counts."
    )
    seed: int = Field(default=0, description="Seed for arrivals and token counts.")
    trace: str | None = Field(default=None, description="Trace file for trace mode.")
    time_scale: float = Field(default=1.0, gt=0, description="Trace replay speed-up.")
    trace_start_s: float = Field(default=0.0, ge=0, description="Skip trace before this time.")
    max_input_tokens: int | None = Field(
        default=None, ge=1, description="Clip traced prompts to this many tokens."
    )
    gpus: int = Field(default=1, ge=1, description="GPUs behind the endpoint (per-GPU figures).")
    max_connections: int = Field(
        default=1024, ge=1, description="Connection pool size for open-loop modes."
    )
    sla: Sla | None = Field(default=None, description="SLA for goodput mode.")
    goodput_start_rps: float = Field(default=1.0, gt=0, description="First goodput trial rate.")
    goodput_rel_tol: float = Field(
        default=0.05, gt=0, lt=1, description="Stop bisecting below this relative width."
    )
    goodput_max_trials: int = Field(default=12, ge=1, description="Trial budget.")

    @model_validator(mode="after")
    def _check(self) -> LoadTestConfig:
        if self.mode == "rate" and not self.rates_rps:
            raise ValueError("rate mode needs at least one --rate")
        if self.mode == "concurrency" and not self.concurrencies:
            raise ValueError("concurrency mode needs at least one --concurrency")
        if self.mode == "trace" and not self.trace:
            raise ValueError("trace mode needs --trace")
        if self.mode == "goodput" and self.sla is None:
            raise ValueError("goodput mode needs --sla")
        if self.mode != "trace" and self.requests is None and self.duration_s is None:
            raise ValueError("give --requests or --duration")
        return self

    def n_for_rate(self, rate_rps: float) -> int:
        """Requests in a run at ``rate_rps``: --requests, or rate x --duration (>= 1)."""
        if self.requests is not None:
            return self.requests
        assert self.duration_s is not None
        return max(1, round(rate_rps * self.duration_s))
