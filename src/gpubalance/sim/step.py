"""Step-time models: how long one continuous-batching iteration of a replica takes.

A replica runs in iterations. Each iteration processes some prefill tokens (whole prompts or
chunks of them) and one token for each decoding sequence. A step-time model turns the
iteration's shape into seconds. :class:`StepTimeModel` is the protocol the replica needs;
``gpubalance.cost.roofline.RooflineModel`` fits it, and so does :class:`LinearStepTime`,
a simple model with five non-negative coefficients that calibration can fit from measured
iteration (or request) times.

Shape of an iteration (all counts are integers except the attention sum):

- ``prefill_tokens``: prompt tokens computed in this iteration, over all sequences.
- ``prefill_attention_pairs``: sum over prefilling sequences of the query x key pairs a
  causal attention kernel computes, ``chunk_len * prior_context + chunk_len*(chunk_len+1)/2``
  (a whole prompt of P tokens in one chunk contributes P*(P+1)/2).
- ``decode_seqs``: sequences producing one more token in this iteration.
- ``decode_context_tokens``: sum over those sequences of the KV-cache tokens the iteration
  reads, i.e. each sequence's context length including the token being processed.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LinearStepTime", "StepTimeModel"]


@runtime_checkable
class StepTimeModel(Protocol):
    """Duration in seconds of one iteration of a replica (see module docstring for shape)."""

    def iteration_time_s(
        self,
        prefill_tokens: int,
        prefill_attention_pairs: float,
        decode_seqs: int,
        decode_context_tokens: int,
    ) -> float:
        """Seconds for one iteration of that shape (> 0 whenever the iteration has work)."""
        ...


class LinearStepTime(BaseModel):
    """Iteration time affine in the iteration's shape, all coefficients >= 0 seconds:

    ``base_s + per_prefill_token_s * prefill_tokens + per_prefill_pair_s * pairs
    + per_decode_seq_s * decode_seqs + per_context_token_s * decode_context_tokens``.

    It doubles as a :class:`~gpubalance.cost.CostModel`: ``cost_s(i, o)`` is the time of one
    request of ``i`` input and ``o`` output tokens run alone (one prefill iteration of the
    whole prompt, then ``o - 1`` decode iterations), which is what cost-aware routing needs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(default="linear_step", description="Discriminator for model files.")
    base_s: float = Field(default=0.0, ge=0, description="Fixed seconds per iteration.")
    per_prefill_token_s: float = Field(
        default=0.0, ge=0, description="Seconds per prefill token in the iteration."
    )
    per_prefill_pair_s: float = Field(
        default=0.0,
        ge=0,
        description="Seconds per prefill attention pair (chunk_len x context_len_after_chunk).",
    )
    per_decode_seq_s: float = Field(
        default=0.0, ge=0, description="Seconds per decoding sequence in the iteration."
    )
    per_context_token_s: float = Field(
        default=0.0, ge=0, description="Seconds per KV-cache token read by decoding sequences."
    )
    gpus: int = Field(default=1, ge=1, description="GPUs the replica occupies (for per-GPU rates).")

    def iteration_time_s(
        self,
        prefill_tokens: int,
        prefill_attention_pairs: float,
        decode_seqs: int,
        decode_context_tokens: int,
    ) -> float:
        """Seconds for one iteration (see class docstring)."""
        return (
            self.base_s
            + self.per_prefill_token_s * prefill_tokens
            + self.per_prefill_pair_s * prefill_attention_pairs
            + self.per_decode_seq_s * decode_seqs
            + self.per_context_token_s * decode_context_tokens
        )

    def cost_s(self, input_tokens: int, output_tokens: int) -> float:
        """Seconds for one request run alone (prefill in one iteration, then decodes)."""
        return float(self.costs_s(np.asarray([input_tokens]), np.asarray([output_tokens]))[0])

    def costs_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`cost_s` (float64 seconds).

        Decode iteration j (1..o-1) reads ``i + j`` context tokens, so the decodes sum to
        ``(o-1)(base + per_seq) + per_ctx ((o-1) i + (o-1) o / 2)``.
        """
        i = np.maximum(np.asarray(input_tokens, dtype=np.float64), 1.0)
        o = np.asarray(output_tokens, dtype=np.float64)
        d = np.maximum(o - 1.0, 0.0)
        prefill = self.base_s + self.per_prefill_token_s * i + self.per_prefill_pair_s * i * i
        decode = d * (self.base_s + self.per_decode_seq_s) + self.per_context_token_s * (
            d * i + d * (d + 1.0) / 2.0
        )
        return prefill + decode
