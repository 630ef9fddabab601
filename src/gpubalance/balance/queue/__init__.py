"""Pull-based work queues with guided self-scheduling (threads or torch.distributed store)."""

from gpubalance.balance.queue.base import WorkQueue
from gpubalance.balance.queue.schedule import guided_bounds
from gpubalance.balance.queue.store_queue import StoreWorkQueue
from gpubalance.balance.queue.thread_queue import ThreadWorkQueue

__all__ = ["StoreWorkQueue", "ThreadWorkQueue", "WorkQueue", "guided_bounds"]
