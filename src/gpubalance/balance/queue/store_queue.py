"""Work queue across processes and nodes on a torch.distributed key-value store.

The ticket counter is one key incremented with the store's atomic ``add``, so any number
of processes (e.g. every rank under ``torchrun``, on any node) can pull chunks; each chunk
goes to exactly one of them. Works with ``TCPStore``, ``FileStore`` and ``PrefixStore``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpubalance.balance.queue.base import WorkQueue

__all__ = ["StoreWorkQueue"]


class StoreWorkQueue(WorkQueue):
    """Work queue whose ticket counter lives in ``store`` under ``<name>/ticket``.

    All processes must use the same ``name``, ``total``, ``workers``, ``factor``,
    ``min_chunk`` and ``items``. Processed-item counts can be published with
    :meth:`add_done` and read with :meth:`done` (e.g. to check nothing was lost).
    """

    def __init__(
        self,
        store: Any,
        total: int,
        workers: int,
        *,
        name: str = "gpubalance/queue",
        factor: float = 1.0,
        min_chunk: int = 1,
        items: np.ndarray | None = None,
    ) -> None:
        super().__init__(total, workers, factor=factor, min_chunk=min_chunk, items=items)
        self.store = store
        self.name = name

    @classmethod
    def from_process_group(
        cls,
        total: int,
        *,
        name: str = "gpubalance/queue",
        factor: float = 1.0,
        min_chunk: int = 1,
        items: np.ndarray | None = None,
    ) -> StoreWorkQueue:
        """Use the store of the initialised default process group (e.g. under torchrun)."""
        import torch.distributed as dist
        from torch.distributed import distributed_c10d

        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised")
        store = distributed_c10d._get_default_store()
        return cls(
            store,
            total,
            dist.get_world_size(),
            name=name,
            factor=factor,
            min_chunk=min_chunk,
            items=items,
        )

    def _ticket(self) -> int:
        return int(self.store.add(f"{self.name}/ticket", 1)) - 1

    def add_done(self, count: int) -> int:
        """Add ``count`` processed items to the shared total; return the new total."""
        return int(self.store.add(f"{self.name}/done", int(count)))

    def done(self) -> int:
        """Items reported processed by all workers so far."""
        return int(self.store.add(f"{self.name}/done", 0))
