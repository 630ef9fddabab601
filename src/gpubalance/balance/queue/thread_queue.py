"""In-process work queue: threads share a lock-protected ticket counter."""

from __future__ import annotations

import threading

import numpy as np

from gpubalance.balance.queue.base import WorkQueue

__all__ = ["ThreadWorkQueue"]


class ThreadWorkQueue(WorkQueue):
    """Work queue for threads of one process (safe to share between them)."""

    def __init__(
        self,
        total: int,
        workers: int,
        *,
        factor: float = 1.0,
        min_chunk: int = 1,
        items: np.ndarray | None = None,
    ) -> None:
        super().__init__(total, workers, factor=factor, min_chunk=min_chunk, items=items)
        self._lock = threading.Lock()
        self._next = 0

    def _ticket(self) -> int:
        with self._lock:
            t = self._next
            self._next += 1
            return t
