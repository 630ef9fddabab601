"""The unit of work: one inference request (or one training/batch-inference item)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

__all__ = ["Request", "RequestArrays", "to_arrays"]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Request:
    """One request.

    Attributes:
        id: unique identifier within its workload.
        arrival_s: arrival time in seconds from the start of the workload (>= 0).
        input_tokens: prompt (context) tokens, >= 0.
        output_tokens: tokens to generate, >= 0 (0 for embeddings).
        tags: free-form labels (tenant, kind, model, ...).
    """

    id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    tags: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if self.input_tokens < 0 or self.output_tokens < 0:
            raise ValueError(f"request {self.id}: token counts must be >= 0")
        if not self.arrival_s >= 0:  # also rejects NaN
            raise ValueError(f"request {self.id}: arrival_s must be >= 0")


@dataclass(frozen=True, slots=True)
class RequestArrays:
    """Columnar view of a workload: parallel numpy arrays, for vectorised cost and balancing.

    ``arrival_s`` is float64 seconds; token arrays are int64.
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.input_tokens.shape[0])


def to_arrays(requests: list[Request] | tuple[Request, ...]) -> RequestArrays:
    """Columnar arrays of ``requests`` in the given order."""
    n = len(requests)
    arrival = np.fromiter((r.arrival_s for r in requests), dtype=np.float64, count=n)
    inp = np.fromiter((r.input_tokens for r in requests), dtype=np.int64, count=n)
    out = np.fromiter((r.output_tokens for r in requests), dtype=np.int64, count=n)
    return RequestArrays(arrival, inp, out)
