"""Find the smallest count that passes a monotone test: galloping then bisection.

The planner asks "how many replicas does this shape need to meet the SLA at this load?".
Each test is a simulation, so the search starts from an analytic estimate, gallops (doubling
the step) to bracket the answer between a failing and a passing count, then bisects. The
test is assumed monotone (more replicas never break an SLA that fewer meet); results are
memoised by the caller's test function, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["SearchOutcome", "smallest_passing"]


@dataclass(slots=True)
class SearchOutcome:
    """Result of :func:`smallest_passing`.

    Attributes:
        value: smallest passing count, or None when even ``cap`` fails.
        probes: counts tested, in order.
    """

    value: int | None
    probes: list[int] = field(default_factory=list)


def smallest_passing(passes: Callable[[int], bool], *, start: int, cap: int) -> SearchOutcome:
    """Smallest ``n`` in ``1..cap`` with ``passes(n)`` true, for a monotone ``passes``.

    Args:
        passes: the test (e.g. "does a fleet of n replicas meet the SLA?").
        start: first guess (clamped to ``1..cap``); a good guess costs O(1) extra probes,
            a bad one O(log distance).
        cap: largest count worth testing; returns ``value=None`` if it fails.
    """
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    probes: list[int] = []

    def test(n: int) -> bool:
        probes.append(n)
        return passes(n)

    start = min(max(1, start), cap)
    if test(start):
        hi = start  # passing
        lo = 0  # failing sentinel (0 replicas never pass)
        step = 1
        while hi > 1:
            probe = max(1, hi - step)
            if test(probe):
                hi = probe
                step *= 2
            else:
                lo = probe
                break
        if hi == 1:
            return SearchOutcome(1, probes)
    else:
        lo = start  # failing
        step = max(1, start)
        while True:
            probe = min(cap, lo + step)
            if probe == lo:  # lo == cap and it failed
                return SearchOutcome(None, probes)
            if test(probe):
                hi = probe
                break
            lo = probe
            step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if test(mid):
            hi = mid
        else:
            lo = mid
    return SearchOutcome(hi, probes)
