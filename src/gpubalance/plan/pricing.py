"""Cost of ownership of a fleet: GPU-hours x price plus optional per-node and fixed costs.

A month is 730 hours (8760 / 12) unless the price file says otherwise. Prices are US
dollars. The GPU price per hour comes from the GPU catalog unless a price file overrides it::

    # prices.yaml
    gpu_hour_usd:            # per GPU per hour; overrides the catalog
      H100-SXM: 2.49
    node_hour_usd: 0.10      # per node per hour (host CPU, RAM, chassis), any GPU count
    storage_month_usd_per_node: 20
    operations_month_usd_per_node: 150
    network_month_usd: 300   # whole fleet, per month
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpubalance.config import load_mapping, validation_error_to_user_error
from gpubalance.errors import UserInputError
from gpubalance.plan.shapes import Shape
from gpubalance.registry import suggest

__all__ = ["HOURS_PER_MONTH", "FleetCost", "PriceBook", "fleet_cost", "load_price_file"]

#: Hours in an average month (8760 h / 12).
HOURS_PER_MONTH = 730.0


class PriceBook(BaseModel):
    """Prices used by the planner (US dollars). Every cost beyond the GPUs defaults to 0."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_hour_usd: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(
        default_factory=dict,
        description="GPU name -> price of one GPU for one hour; overrides the catalog price.",
    )
    node_hour_usd: float = Field(
        default=0.0, ge=0, description="Cost of one node (host, chassis) per hour, any size."
    )
    storage_month_usd_per_node: float = Field(
        default=0.0, ge=0, description="Storage (model weights, logs) per node per month."
    )
    operations_month_usd_per_node: float = Field(
        default=0.0, ge=0, description="Operations (engineer time, support) per node per month."
    )
    network_month_usd: float = Field(
        default=0.0, ge=0, description="Network (egress, load balancer) for the fleet per month."
    )
    hours_per_month: float = Field(
        default=HOURS_PER_MONTH, gt=0, le=744, description="Billable hours in a month."
    )
    source: str = Field(default="", description="Where these prices come from (cite it).")


@dataclass(frozen=True, slots=True)
class FleetCost:
    """Monthly cost of a fleet (US dollars) and its parts.

    Attributes:
        gpu_month_usd: GPU-hours in a month x price per GPU-hour.
        node_month_usd: per-node hourly cost x hours x nodes.
        storage_month_usd, operations_month_usd: per-node monthly costs x nodes.
        network_month_usd: fixed fleet network cost.
        gpu_hours_month: GPU-hours billed in a month.
    """

    gpu_month_usd: float
    node_month_usd: float
    storage_month_usd: float
    operations_month_usd: float
    network_month_usd: float
    gpu_hours_month: float

    @property
    def month_usd(self) -> float:
        """Total per month."""
        return (
            self.gpu_month_usd
            + self.node_month_usd
            + self.storage_month_usd
            + self.operations_month_usd
            + self.network_month_usd
        )

    def usd_per_million_tokens(
        self,
        rate_rps: float,
        mean_tokens_per_request: float,
        hours_per_month: float = HOURS_PER_MONTH,
    ) -> float:
        """Monthly cost over the tokens (input + output) served in that month at ``rate_rps``."""
        tokens_month = rate_rps * mean_tokens_per_request * hours_per_month * 3600.0
        if tokens_month <= 0:
            return math.inf
        return self.month_usd / (tokens_month / 1e6)


def fleet_cost(shape: Shape, nodes: int, price_gpu_hour_usd: float, book: PriceBook) -> FleetCost:
    """Monthly cost of ``nodes`` nodes of ``shape`` with the GPU at ``price_gpu_hour_usd``."""
    if nodes < 0:
        raise ValueError(f"nodes must be >= 0, got {nodes}")
    hours = book.hours_per_month
    gpu_hours = nodes * shape.gpus_per_node * hours
    return FleetCost(
        gpu_month_usd=gpu_hours * price_gpu_hour_usd,
        node_month_usd=nodes * book.node_hour_usd * hours,
        storage_month_usd=nodes * book.storage_month_usd_per_node,
        operations_month_usd=nodes * book.operations_month_usd_per_node,
        network_month_usd=book.network_month_usd if nodes > 0 else 0.0,
        gpu_hours_month=gpu_hours,
    )


def load_price_file(path: str | Path, known_gpus: Iterable[str] | None = None) -> PriceBook:
    """Load a price file (YAML/JSON); errors name file, line and field.

    With ``known_gpus`` given, GPU names in ``gpu_hour_usd`` must be catalog names (matched
    case-insensitively and normalised to the catalog spelling); unknown ones get the nearest
    name suggested.
    """
    data, lines = load_mapping(path)
    if data is None:
        raise UserInputError("price file is empty", file=path)
    try:
        book = PriceBook.model_validate(data)
    except ValidationError as exc:
        raise validation_error_to_user_error(exc, file=path, lines=lines) from None
    if known_gpus is None:
        return book
    canon = {g.lower(): g for g in known_gpus}
    fixed: dict[str, float] = {}
    for name, price in book.gpu_hour_usd.items():
        if name.lower() not in canon:
            known = sorted(canon.values())
            raise UserInputError(
                f"unknown GPU {name!r}{suggest(name, known)}; known: {', '.join(known)}",
                file=path,
                line=lines.get(("gpu_hour_usd", name)),
                field=f"gpu_hour_usd.{name}",
            )
        fixed[canon[name.lower()]] = price
    return book.model_copy(update={"gpu_hour_usd": fixed})
