"""Marginal cost of a request on a busy continuous-batching replica (the routing price).

A request's standalone cost (its prefill, then ``output - 1`` decode iterations at batch 1)
badly misstates the load it adds to a replica that batches continuously: every decode
iteration reads the model weights once for the whole batch, so a decoding sequence adds only
its own share of the math and its KV reads, while a prompt's prefill is compute-bound and is
not shared. Priced standalone, a short prompt with 300 output tokens looks ten times dearer
than a 4,000-token prompt with 10, when on a loaded replica the prompt is the heavier load.

:class:`BatchedCost` prices a request by the seconds it adds to the iterations of a replica
that is already busy with ``reference_tokens`` prefill tokens per iteration (compute-bound,
where routing matters): with ``f`` the step model's iteration time,

* prefill: ``f(R + i, T(R) + T(i), 0, 0) - f(R, T(R), 0, 0)`` with ``T(n) = n(n+1)/2`` the
  causal attention pairs of an ``n``-token prompt (its ``i`` tokens joining a busy
  iteration, attention pairs of separate sequences adding up),
* decode: ``o - 1`` tokens (``o`` when there is no prompt), each
  ``m(c) = f(R, T(R), 1, c) - f(R, T(R), 0, 0)`` at context ``c`` from ``i + 1`` to ``i + o - 1``,
  summed by the trapezoid of the first and last (exact when ``m`` is affine in ``c``).

The result is a :class:`~gpubalance.cost.base.CostModel`; least outstanding cost routing
(``gpubalance.route.LeastCost``) sums it over a backend's in-flight requests. The gateway
and the simulator both route with it when they know the replica's step model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

__all__ = ["BatchedCost", "IterationTimeModel"]


class IterationTimeModel(Protocol):
    """Anything that times one continuous-batching iteration (the simulator's step models,
    :class:`~gpubalance.cost.roofline.RooflineModel`)."""

    def iteration_time_s(
        self,
        prefill_tokens: int,
        prefill_attention_pairs: float,
        decode_seqs: int,
        decode_context_tokens: int,
    ) -> float: ...


class BatchedCost:
    """Seconds a request adds to a busy replica's iterations (see module docstring).

    Args:
        step_model: the replica's iteration time model.
        reference_tokens: prefill tokens per iteration of the busy replica the request joins
            (> 0). Any size at which the iteration is compute-bound gives the same prices
            for a roofline model (512 and 2,048 route identically in the simulator).
    """

    def __init__(self, step_model: IterationTimeModel, reference_tokens: int = 512) -> None:
        if reference_tokens <= 0:
            raise ValueError(f"reference_tokens must be > 0, got {reference_tokens}")
        self.step_model = step_model
        self.reference_tokens = int(reference_tokens)
        r = self.reference_tokens
        self._pairs = r * (r + 1) / 2.0
        self._base = step_model.iteration_time_s(r, self._pairs, 0, 0)
        # memo of the two one-argument terms: workloads repeat prompt lengths and contexts,
        # and a planner prices the same workload in many simulations
        self._prefill: dict[int, float] = {0: 0.0}
        self._decode: dict[int, float] = {}

    def prefill_s(self, input_tokens: int) -> float:
        """Seconds ``input_tokens`` of prompt add to a busy iteration (0 for no prompt)."""
        i = max(int(input_tokens), 0)
        v = self._prefill.get(i)
        if v is None:
            f = self.step_model.iteration_time_s
            pairs = self._pairs + i * (i + 1) / 2.0
            v = self._prefill[i] = max(f(self.reference_tokens + i, pairs, 0, 0) - self._base, 0.0)
        return v

    def decode_token_s(self, context_tokens: int) -> float:
        """Seconds one decoding sequence with ``context_tokens`` in its KV cache adds to a
        busy iteration."""
        c = int(context_tokens)
        v = self._decode.get(c)
        if v is None:
            f = self.step_model.iteration_time_s
            v = self._decode[c] = max(f(self.reference_tokens, self._pairs, 1, c) - self._base, 0.0)
        return v

    def cost_s(self, input_tokens: int, output_tokens: int) -> float:
        """Marginal seconds of one request of ``input_tokens`` prompt and ``output_tokens``
        generated tokens on a busy replica."""
        i = max(int(input_tokens), 0)
        o = max(int(output_tokens), 0)
        n = max(o - 1, 0) if i > 0 else o  # decode tokens after the prompt's first token
        c = self.prefill_s(i)
        if n > 0:
            c += n * 0.5 * (self.decode_token_s(i + 1) + self.decode_token_s(i + n))
        return c

    def _lookup(self, values: np.ndarray, term: Callable[[int], float]) -> np.ndarray:
        """``term`` at each element of ``values``, evaluated once per distinct value."""
        uniq, inverse = np.unique(values, return_inverse=True)
        table = np.fromiter((term(v) for v in uniq.tolist()), dtype=np.float64, count=len(uniq))
        return table[inverse]

    def costs_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        """:meth:`cost_s` for each pair (float64 seconds), each distinct prompt length and
        context priced once."""
        i = np.maximum(np.asarray(input_tokens, dtype=np.int64), 0)
        o = np.maximum(np.asarray(output_tokens, dtype=np.int64), 0)
        n = np.where(i > 0, np.maximum(o - 1, 0), o)
        cost = self._lookup(i, self.prefill_s)
        has = n > 0
        if has.any():
            ends = np.concatenate([i[has] + 1, i[has] + n[has]])
            m = self._lookup(ends, self.decode_token_s)
            k = int(has.sum())
            cost[has] += n[has] * 0.5 * (m[:k] + m[k:])
        return cost

    def __repr__(self) -> str:
        return f"BatchedCost({self.step_model!r}, reference_tokens={self.reference_tokens})"
