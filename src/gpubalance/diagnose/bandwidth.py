"""Bandwidth definitions of nccl-tests (doc/PERFORMANCE.md).

``algbw = size_bytes / time_s``, where ``size_bytes`` is the buffer size nccl-tests reports:
the full buffer for all-reduce and broadcast, the gathered (output) buffer for all-gather and
the full (input) buffer for reduce-scatter. ``busbw = algbw * factor(n)``: all-reduce
``2(n-1)/n``, all-gather and reduce-scatter ``(n-1)/n``, broadcast ``1``. busbw is comparable
with the hardware's link bandwidth whatever the number of ranks.
"""

from __future__ import annotations

from gpubalance.errors import UserInputError

__all__ = ["OPS", "algbw_bytes_s", "bus_factor", "busbw_bytes_s"]

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def bus_factor(op: str, n_ranks: int) -> float:
    """The nccl-tests bus-bandwidth factor of ``op`` on ``n_ranks`` ranks."""
    if n_ranks < 1:
        raise UserInputError("n_ranks must be at least 1", field="n_ranks")
    n = n_ranks
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise UserInputError(f"unknown collective {op!r}; use one of {', '.join(OPS)}", field="op")


def algbw_bytes_s(size_bytes: float, time_s: float) -> float:
    """Algorithm bandwidth: bytes per second."""
    return size_bytes / time_s if time_s > 0 else float("inf")


def busbw_bytes_s(op: str, size_bytes: float, time_s: float, n_ranks: int) -> float:
    """Bus bandwidth: algbw times :func:`bus_factor`."""
    return algbw_bytes_s(size_bytes, time_s) * bus_factor(op, n_ranks)


def parse_size(text: str) -> int:
    """``'4K'`` -> 4096, ``'1M'`` -> 1048576, ``'512'`` -> 512 (binary multiples)."""
    t = text.strip().upper().removesuffix("B")
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if t.endswith(suffix):
            t, mult = t[:-1], m
            break
    try:
        value = float(t)
    except ValueError as exc:
        raise UserInputError(f"bad size {text!r} (use e.g. 4K, 1M)", field="sizes") from exc
    if value <= 0:
        raise UserInputError(f"size must be positive: {text!r}", field="sizes")
    return int(value * mult)
