"""Limits for one micro-batch that count padding and the quadratic (attention) term.

A padded batch runs every item at the length of its longest item, so what a batch costs
is ``items x cost of the longest``, not the sum of item costs. The constraint holds up to
three limits, each optional (``None`` = unlimited), all strict:

* ``max_cost_s``: padded cost budget in seconds, ``items x max item cost``; item costs
  come from a cost model, whose quadratic prefill term makes long items cost more than
  their length (lhotse's ``TimeConstraint`` with ``quadratic_duration`` in spirit).
* ``max_tokens``: padded token budget, ``items x (L + L**2 / quadratic_tokens)`` for the
  longest item's length L in tokens (``quadratic_tokens=None``: ``items x L``).
* ``max_items``: items per batch.

With ``padding=False`` the batch is *packed* (sequences concatenated, attention kept
within each sequence, e.g. variable-length flash attention): it costs the sum of its
item costs and the sum of their token measures instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpubalance.errors import UserInputError

__all__ = ["BatchConstraint"]


@dataclass(frozen=True, slots=True)
class BatchConstraint:
    """Strict limits on one micro-batch (see the module docstring for the measures)."""

    max_cost_s: float | None = None
    max_tokens: float | None = None
    max_items: int | None = None
    quadratic_tokens: float | None = None
    padding: bool = True

    def __post_init__(self) -> None:
        if self.max_cost_s is None and self.max_tokens is None and self.max_items is None:
            raise UserInputError("a batch constraint needs at least one limit", field="budget")
        for name in ("max_cost_s", "max_tokens", "quadratic_tokens"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise UserInputError(f"{name} must be a number > 0, got {value!r}", field=name)
        if self.max_items is not None and self.max_items < 1:
            raise UserInputError(
                f"max_items must be >= 1, got {self.max_items!r}", field="max_items"
            )

    def token_measure(self, tokens: np.ndarray) -> np.ndarray:
        """Per-item token measure ``L + L**2 / quadratic_tokens`` (float64)."""
        t = np.asarray(tokens, dtype=np.float64)
        if self.quadratic_tokens is None:
            return t
        return t + t * t / self.quadratic_tokens

    def limits(self) -> tuple[float, float, int]:
        """(cost limit s, token limit, item limit) with ``inf``/huge for unset ones."""
        return (
            float("inf") if self.max_cost_s is None else float(self.max_cost_s),
            float("inf") if self.max_tokens is None else float(self.max_tokens),
            np.iinfo(np.int64).max if self.max_items is None else int(self.max_items),
        )

    def batch_cost_s(self, item_costs_s: np.ndarray) -> float:
        """Cost of a batch, seconds: ``items x max item cost`` (padded) or the sum (packed)."""
        c = np.asarray(item_costs_s, dtype=np.float64)
        if not c.size:
            return 0.0
        return float(c.shape[0] * c.max()) if self.padding else float(c.sum())

    def batch_tokens(self, tokens: np.ndarray) -> float:
        """Token measure of a batch: ``items x max measure`` (padded) or the sum (packed)."""
        m = self.token_measure(tokens)
        if not m.size:
            return 0.0
        return float(m.shape[0] * m.max()) if self.padding else float(m.sum())

    def fits(self, item_costs_s: np.ndarray, tokens: np.ndarray | None = None) -> bool:
        """Whether a batch of these items satisfies every limit."""
        cost_lim, tok_lim, item_lim = self.limits()
        c = np.asarray(item_costs_s)
        if c.shape[0] > item_lim or self.batch_cost_s(c) > cost_lim:
            return False
        return tokens is None or self.batch_tokens(tokens) <= tok_lim

    def check_items_fit(
        self,
        item_costs_s: np.ndarray,
        tokens: np.ndarray | None = None,
        *,
        item_names: list[str] | None = None,
    ) -> None:
        """Raise UserInputError naming the first item that alone exceeds a limit."""
        cost_lim, tok_lim, _ = self.limits()
        costs = np.asarray(item_costs_s, dtype=np.float64)
        bad = costs > cost_lim
        measure_name = "max_cost_s"
        if tokens is not None and tok_lim != float("inf"):
            tbad = self.token_measure(tokens) > tok_lim
            if tbad.any() and (not bad.any() or np.flatnonzero(tbad)[0] < np.flatnonzero(bad)[0]):
                bad, measure_name = tbad, "max_tokens"
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            who = item_names[i] if item_names is not None else str(i)
            if measure_name == "max_cost_s":
                what = f"costs {costs[i]:.6g} s > budget {cost_lim:.6g} s"
            else:
                assert tokens is not None
                what = (
                    f"measures {float(self.token_measure(tokens[i : i + 1])[0]):.6g} tokens "
                    f"> budget {tok_lim:.6g}"
                )
            label = f"request id {who}" if item_names is not None else f"item {who}"
            raise UserInputError(
                f"budget smaller than one item: {label} alone {what}", field="batch-budget"
            )
