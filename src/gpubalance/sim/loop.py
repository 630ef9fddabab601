"""Discrete-event loop: a heap of timed events; handlers return new events; only the loop
owns the clock (the shape of microsoft/vidur's ``simulator.py``).

An event is a plain tuple ``(time_s, kind, payload)``: ``kind`` indexes the handler list,
``payload`` is anything the handler understands. Handlers have the signature
``handler(time_s, payload) -> iterable of events | None`` and never touch the clock. Events
at equal times run in the order they were scheduled (a sequence number breaks ties).

Besides the heap, the loop merges one pre-sorted *source* of times (e.g. request arrivals)
without pushing it onto the heap: a million arrivals cost a list index each, not a heap
push and pop. At equal times a source event runs before heap events.

Time is in seconds (float). No per-event objects: the heap holds tuples.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["Event", "EventLoop", "Handler"]

#: ``(time_s, kind, payload)``
Event = tuple[float, int, Any]
Handler = Callable[[float, Any], Iterable[Event] | None]


class EventLoop:
    """Runs events in time order until none remain, ``until_s`` is passed, or a handler
    calls :meth:`stop`.

    Args:
        handlers: handler per event kind (``kind`` is the index in this sequence).
    """

    def __init__(self, handlers: Sequence[Handler]) -> None:
        self._handlers = list(handlers)
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._now = 0.0
        self._stopped = False
        self.stop_reason = ""
        self.events_run = 0

    @property
    def now_s(self) -> float:
        """Time of the event being (or last) handled, seconds."""
        return self._now

    @property
    def stopped(self) -> bool:
        """True once a handler called :meth:`stop`."""
        return self._stopped

    def schedule(self, time_s: float, kind: int, payload: Any = None) -> None:
        """Add an event; it must not lie in the past of the current event."""
        if time_s < self._now:
            raise ValueError(f"event at {time_s} s is before the clock ({self._now} s)")
        heapq.heappush(self._heap, (time_s, self._seq, kind, payload))
        self._seq += 1

    def stop(self, reason: str = "") -> None:
        """End the run after the current event (handlers call this for early exits)."""
        self._stopped = True
        self.stop_reason = reason

    def peek_s(self) -> float:
        """Time of the next heap event (``inf`` if none); the source is not included."""
        return self._heap[0][0] if self._heap else math.inf

    def run(
        self,
        source_s: Sequence[float] = (),
        source_kind: int = 0,
        until_s: float = math.inf,
    ) -> float:
        """Run events; returns the clock (time of the last event handled), seconds.

        Args:
            source_s: non-decreasing times; the i-th fires ``handlers[source_kind](t, i)``.
                A Python list is fastest.
            source_kind: handler index for source events.
            until_s: stop before the first event later than this (it stays queued).
        """
        heap = self._heap
        handlers = self._handlers
        pop = heapq.heappop
        push = heapq.heappush
        n_src = len(source_s)
        si = 0
        count = 0
        while not self._stopped:
            if si < n_src and (not heap or source_s[si] <= heap[0][0]):
                t = source_s[si]
                if t > until_s:
                    break
                if t < self._now:
                    raise ValueError(f"source times must not decrease (index {si}: {t} s)")
                kind: int = source_kind
                payload: Any = si
                si += 1
            elif heap:
                if heap[0][0] > until_s:
                    break
                t, _, kind, payload = pop(heap)
            else:
                break
            self._now = t
            count += 1
            new = handlers[kind](t, payload)
            if new:
                for time_s, k, p in new:
                    if time_s < t:
                        raise ValueError(f"handler scheduled an event in the past ({time_s} s)")
                    push(heap, (time_s, self._seq, k, p))
                    self._seq += 1
        self.events_run += count
        return self._now
