"""Arrivals for the simulator: columnar request arrays from a trace, a list of requests, or a
seeded generator at a rate with growth; time scaling of traces.

The simulator works on :class:`~gpubalance.workload.RequestArrays` (numpy columns) rather
than lists of :class:`~gpubalance.workload.Request`, so a planner can generate a workload
once and replay it at many rates without building a million Python objects each time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpubalance.errors import UserInputError
from gpubalance.workload import Request, RequestArrays, WorkloadProfile, default_profile, to_arrays
from gpubalance.workload.generators import (
    ArrivalKind,
    LengthKind,
    generate_arrivals,
    generate_lengths,
)

__all__ = ["as_request_arrays", "generate_arrays", "scale_arrivals"]


def as_request_arrays(requests: Sequence[Request] | RequestArrays) -> RequestArrays:
    """Columnar, arrival-sorted view of ``requests`` (a stable sort keeps trace order on ties).

    Order matters for the result: request ``i`` of the returned arrays is the ``i``-th
    arrival. Raises UserInputError on negative or non-finite arrival times.
    """
    arr = requests if isinstance(requests, RequestArrays) else to_arrays(list(requests))
    t = np.asarray(arr.arrival_s, dtype=np.float64)
    if t.size and (not np.all(np.isfinite(t)) or t.min() < 0):
        raise UserInputError("arrival times must be finite and >= 0 seconds")
    inp = np.asarray(arr.input_tokens, dtype=np.int64)
    out = np.asarray(arr.output_tokens, dtype=np.int64)
    if t.size and (inp.min() < 0 or out.min() < 0):
        raise UserInputError("token counts must be >= 0")
    if t.size > 1 and np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, inp, out = t[order], inp[order], out[order]
    return RequestArrays(t, inp, out)


def scale_arrivals(arrays: RequestArrays, rate_scale: float) -> RequestArrays:
    """The same requests arriving ``rate_scale`` times as fast (arrival times divided by it):
    2.0 replays a trace at twice its rate, 0.5 at half."""
    if not rate_scale > 0:
        raise UserInputError(f"rate scale must be > 0, got {rate_scale}")
    if rate_scale == 1.0:
        return arrays
    return RequestArrays(arrays.arrival_s / rate_scale, arrays.input_tokens, arrays.output_tokens)


def generate_arrays(
    n: int,
    *,
    seed: int,
    profile: WorkloadProfile | None = None,
    rate_rps: float | None = None,
    arrivals: ArrivalKind | None = None,
    growth: float = 1.0,
    lengths: LengthKind = "empirical",
) -> RequestArrays:
    """Columnar twin of :func:`gpubalance.workload.generate_workload`: the same requests for
    the same arguments and seed, without building Request objects.

    Args:
        n: number of requests.
        seed: random seed.
        profile: workload profile (default: the embedded default profile).
        rate_rps: mean arrival rate in requests per second (default: the profile's).
        arrivals: ``"poisson"`` or ``"gamma"`` (default as in ``generate_workload``).
        growth: arrival rate at the end over the rate at the start (exponential in between).
        lengths: ``"empirical"`` or ``"lognormal"`` token lengths.
    """
    prof = profile if profile is not None else default_profile()
    rate = prof.rate_rps if rate_rps is None else rate_rps
    cv = prof.interarrival_cv
    kind: ArrivalKind = arrivals or ("gamma" if abs(cv - 1.0) > 0.05 and cv > 0 else "poisson")
    seq = np.random.SeedSequence(seed)
    s_arr, s_len = (int(s.generate_state(1)[0]) for s in seq.spawn(2))
    t = generate_arrivals(n, rate, kind=kind, cv=cv if cv > 0 else 1.0, growth=growth, seed=s_arr)
    inp, out = generate_lengths(prof, n, kind=lengths, seed=s_len)
    return RequestArrays(
        np.asarray(t, dtype=np.float64),
        np.asarray(inp, dtype=np.int64),
        np.asarray(out, dtype=np.int64),
    )
