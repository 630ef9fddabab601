"""The cost-model contract shared by balancing, routing, simulation and planning.

A cost model predicts how many seconds of GPU time one unit of work takes, from its token
counts. Anything with these two methods is a cost model; :class:`CallableCost` wraps a plain
Python function so any user formula serves too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["CallableCost", "CostModel", "as_cost_model"]


@runtime_checkable
class CostModel(Protocol):
    """Predicts the cost of a request in seconds from its token counts."""

    def cost_s(self, input_tokens: int, output_tokens: int) -> float:
        """Cost of one request in seconds (>= 0)."""
        ...

    def costs_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`cost_s`: float64 seconds, one per element."""
        ...


class CallableCost:
    """Adapts ``fn(input_tokens, output_tokens) -> seconds`` to :class:`CostModel`.

    ``costs_s`` calls ``fn`` on whole arrays when it supports numpy broadcasting, and falls
    back to element-wise calls when it does not.
    """

    def __init__(self, fn: Callable[[int, int], float], *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callable")

    def cost_s(self, input_tokens: int, output_tokens: int) -> float:
        return float(self.fn(input_tokens, output_tokens))

    def costs_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        inp = np.asarray(input_tokens)
        out = np.asarray(output_tokens)
        try:
            res = np.asarray(self.fn(inp, out), dtype=np.float64)  # type: ignore[arg-type]
            if res.shape == inp.shape:
                return res
        except (TypeError, ValueError):
            pass
        return np.fromiter(
            (self.fn(int(i), int(o)) for i, o in zip(inp, out, strict=True)),
            dtype=np.float64,
            count=inp.shape[0],
        )

    def __repr__(self) -> str:
        return f"CallableCost({self.name})"


def as_cost_model(model: CostModel | Callable[[int, int], float]) -> CostModel:
    """Return ``model`` itself if it is a cost model, else wrap the callable."""
    if isinstance(model, CostModel):
        return model
    if callable(model):
        return CallableCost(model)
    raise TypeError(f"not a cost model or callable: {model!r}")
