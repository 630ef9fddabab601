"""The pull-based work queue contract.

Workers call :meth:`WorkQueue.claim` whenever they are free and get the next chunk of
item indices (guided self-scheduling, see :mod:`.schedule`), or ``None`` when the queue is
drained. A chunk is owned by exactly one claim because claims take unique tickets from an
atomic counter; backends differ only in where that counter lives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from functools import cached_property

import numpy as np

from gpubalance.balance.queue.schedule import guided_bounds

__all__ = ["WorkQueue"]


class WorkQueue(ABC):
    """Chunks of ``items`` (default ``0..total-1``) handed out once each.

    Args:
        total: number of items.
        workers: number of workers pulling (sets the chunk sizes).
        factor: guided self-scheduling factor (chunk = remaining / (factor x workers)).
        min_chunk: smallest chunk, items.
        items: optional item order, e.g. indices by cost descending so the large items go
            first and the small ones fill the end.
    """

    def __init__(
        self,
        total: int,
        workers: int,
        *,
        factor: float = 1.0,
        min_chunk: int = 1,
        items: np.ndarray | None = None,
    ) -> None:
        self.total = int(total)
        self.workers = int(workers)
        self.factor = float(factor)
        self.min_chunk = int(min_chunk)
        if items is not None and len(items) != self.total:
            raise ValueError(f"items has {len(items)} entries, total is {self.total}")
        self.items = None if items is None else np.asarray(items, dtype=np.int64)

    @cached_property
    def bounds(self) -> np.ndarray:
        """Chunk boundaries (computed on first use)."""
        return guided_bounds(self.total, self.workers, factor=self.factor, min_chunk=self.min_chunk)

    @abstractmethod
    def _ticket(self) -> int:
        """Next ticket number (0, 1, 2, ... across all workers, each exactly once)."""

    def claim(self) -> np.ndarray | None:
        """The next chunk of item indices, or ``None`` when every chunk is taken."""
        t = self._ticket()
        if t >= self.bounds.shape[0] - 1:
            return None
        lo, hi = int(self.bounds[t]), int(self.bounds[t + 1])
        if self.items is None:
            return np.arange(lo, hi, dtype=np.int64)
        return self.items[lo:hi]

    def __iter__(self) -> Iterator[np.ndarray]:
        """Claim chunks until the queue is drained."""
        while (chunk := self.claim()) is not None:
            yield chunk

    def drain(self, fn: Callable[[np.ndarray], object]) -> int:
        """Call ``fn(chunk)`` on every chunk this worker claims; return items processed."""
        done = 0
        for chunk in self:
            fn(chunk)
            done += int(chunk.shape[0])
        return done
