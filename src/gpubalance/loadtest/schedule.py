"""Load shapes turned into request schedules (when to send, with which token counts).

Open-loop shapes fix the send times in advance so they do not depend on how fast the
server answers: ``constant`` (evenly spaced), ``poisson`` (exponential gaps), ``gamma``
(gap CV > 1 is bursty; both via :func:`gpubalance.workload.generate_arrivals`) and
``trace`` (arrival times and token counts of a recorded trace, times divided by a
time-scale factor: 2.0 replays twice as fast). Closed-loop concurrency uses the same token
counts but no send times (see :mod:`gpubalance.loadtest.runner`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from gpubalance.errors import UserInputError
from gpubalance.loadtest.records import RequestSpec
from gpubalance.workload import generate_arrivals, load_trace

__all__ = ["Shape", "TokenSpec", "open_loop_schedule", "token_counts", "trace_schedule"]

Shape = Literal["constant", "poisson", "gamma"]


class TokenSpec:
    """Token counts per request: fixed, or uniform in ``[mean*(1-spread), mean*(1+spread)]``.

    Args:
        input_tokens: mean prompt length in tokens (>= 1).
        output_tokens: mean answer length in tokens (>= 0; embeddings ignore it).
        spread: relative half-width of the uniform range (0 = fixed, < 1).
    """

    def __init__(self, input_tokens: int, output_tokens: int, spread: float = 0.0) -> None:
        if input_tokens < 1:
            raise UserInputError(f"input tokens must be >= 1, got {input_tokens}")
        if output_tokens < 0:
            raise UserInputError(f"output tokens must be >= 0, got {output_tokens}")
        if not 0.0 <= spread < 1.0:
            raise UserInputError(f"token spread must be in [0, 1), got {spread}")
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.spread = spread


def token_counts(tokens: TokenSpec, n: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` (input, output) token counts (int64 arrays) from ``tokens``."""
    rng = np.random.default_rng(seed)

    def draw(mean: int, lo_min: int) -> np.ndarray:
        if tokens.spread == 0.0 or mean == 0:
            return np.full(n, mean, dtype=np.int64)
        lo = max(lo_min, round(mean * (1 - tokens.spread)))
        hi = max(lo, round(mean * (1 + tokens.spread)))
        return rng.integers(lo, hi + 1, size=n, dtype=np.int64)

    return draw(tokens.input_tokens, 1), draw(tokens.output_tokens, 1)


def open_loop_schedule(
    shape: Shape,
    rate_rps: float,
    n: int,
    tokens: TokenSpec,
    *,
    cv: float = 2.0,
    seed: int,
) -> list[RequestSpec]:
    """``n`` requests at mean ``rate_rps``; the first is sent at 0 s.

    ``cv`` is the gap coefficient of variation for ``gamma`` (> 1 is burstier than Poisson).
    """
    if not rate_rps > 0:
        raise UserInputError(f"rate must be > 0 req/s, got {rate_rps}", field="rate")
    if n < 1:
        raise UserInputError(f"need at least 1 request, got {n}", field="requests")
    seq = np.random.SeedSequence(seed)
    s_arr, s_tok = (int(s.generate_state(1)[0]) for s in seq.spawn(2))
    if shape == "constant":
        t = np.arange(n, dtype=np.float64) / rate_rps
    elif shape in ("poisson", "gamma"):
        t = generate_arrivals(n, rate_rps, kind=shape, cv=cv, seed=s_arr)
        t = t - t[0]
    else:
        raise UserInputError(f"unknown load shape {shape!r}; known: constant, poisson, gamma")
    inp, out = token_counts(tokens, n, seed=s_tok)
    return [RequestSpec(i, float(t[i]), int(inp[i]), int(out[i])) for i in range(n)]


def trace_schedule(
    path: str | Path,
    *,
    time_scale: float = 1.0,
    limit: int | None = None,
    start_s: float = 0.0,
    max_input_tokens: int | None = None,
) -> list[RequestSpec]:
    """Replay a trace (Azure CSV or JSONL, see :func:`gpubalance.workload.load_trace`).

    Args:
        time_scale: speed-up factor (> 0): send times are ``arrival_s / time_scale``.
        limit: keep only the first ``limit`` requests after ``start_s``.
        start_s: skip requests that arrived before this trace time (seconds).
        max_input_tokens: clip prompts to this many tokens (the model's context), if set.
    """
    if not time_scale > 0:
        raise UserInputError(f"time scale must be > 0, got {time_scale}", field="time_scale")
    reqs = [r for r in load_trace(path) if r.arrival_s >= start_s]
    if limit is not None:
        reqs = reqs[:limit]
    if not reqs:
        raise UserInputError("no requests in the selected part of the trace", file=path)
    base = reqs[0].arrival_s
    specs = []
    for i, r in enumerate(reqs):
        inp = max(1, r.input_tokens)
        if max_input_tokens is not None:
            inp = min(inp, max_input_tokens)
        specs.append(
            RequestSpec(i, (r.arrival_s - base) / time_scale, inp, max(1, r.output_tokens))
        )
    return specs
