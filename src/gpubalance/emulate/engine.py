"""Drives THE simulator replica model (:class:`gpubalance.sim.replica.Replica`) in real time.

One asyncio task runs the replica: ``step()``, sleep the iteration's ``duration_s`` (against
an absolute deadline so event-loop lag does not stretch the schedule), then deliver the
iteration's emissions to the waiting HTTP requests. Requests added while an iteration runs
join the next one, exactly as in continuous batching. With no replica (``--instant``) every
request completes at once with all its tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from gpubalance.sim.replica import Replica

__all__ = ["EmulatedRequest", "Engine"]


class EmulatedRequest:
    """Handle of one request inside the engine; the HTTP side awaits its tokens.

    ``tokens`` counts emitted tokens; ``first_token_s``/``finish_s`` are loop times.
    ``events`` (streaming only) receives the number of new tokens per iteration, then None
    when finished.
    """

    __slots__ = (
        "done",
        "events",
        "finish_s",
        "first_token_s",
        "input_tokens",
        "output_tokens",
        "start_s",
        "tokens",
    )

    def __init__(self, input_tokens: int, output_tokens: int, stream: bool, start_s: float):
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.tokens = 0
        self.start_s = start_s
        self.first_token_s = -1.0
        self.finish_s = -1.0
        loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = loop.create_future()
        self.events: asyncio.Queue[int | None] | None = asyncio.Queue() if stream else None


class Engine:
    """Real-time driver of one replica (or an instant stand-in when ``replica`` is None)."""

    def __init__(self, replica: Replica | None) -> None:
        self.replica = replica
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.completed = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.busy_s = 0.0

    @property
    def num_running(self) -> int:
        return 0 if self.replica is None else self.replica.num_running

    @property
    def num_waiting(self) -> int:
        return 0 if self.replica is None else self.replica.num_waiting

    @property
    def kv_usage(self) -> float:
        return 0.0 if self.replica is None else self.replica.kv_usage

    def fits(self, input_tokens: int, output_tokens: int) -> bool:
        return self.replica is None or self.replica.fits(input_tokens, output_tokens)

    async def start(self) -> None:
        self._wake = asyncio.Event()
        if self.replica is not None:
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def submit(self, input_tokens: int, output_tokens: int, stream: bool) -> EmulatedRequest:
        """Queue a request; await ``req.done`` (or read ``req.events``) for its tokens.
        Raises :class:`gpubalance.sim.replica.RequestTooLarge` when it can never fit."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        req = EmulatedRequest(input_tokens, output_tokens, stream, now)
        self.prompt_tokens_total += input_tokens
        if self.replica is None:
            req.tokens = output_tokens
            req.first_token_s = req.finish_s = now
            if req.events is not None and output_tokens:
                req.events.put_nowait(output_tokens)
            self._finish(req, now)
            return req
        self.replica.add_tokens(req, input_tokens, output_tokens)
        assert self._wake is not None
        self._wake.set()
        return req

    def _finish(self, req: EmulatedRequest, now: float) -> None:
        req.finish_s = now
        self.completed += 1
        self.generation_tokens_total += req.tokens
        if req.events is not None:
            req.events.put_nowait(None)
        if not req.done.done():
            req.done.set_result(None)

    async def _run(self) -> None:
        replica = self.replica
        assert replica is not None and self._wake is not None
        loop = asyncio.get_running_loop()
        clock = loop.time()
        while True:
            if not replica.has_work:
                self._wake.clear()
                await self._wake.wait()
                clock = loop.time()
            now = loop.time()
            if clock < now - 0.05:  # fell far behind (loop stall): do not try to catch up
                clock = now
            res = replica.step(now_s=clock)
            clock += res.duration_s
            self.busy_s += res.duration_s
            delay = clock - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            t = loop.time()
            for seq in res.first_token:
                self._emit(seq.key, t, first=True)
            for seq in res.tokens:
                self._emit(seq.key, t, first=False)
            for seq in res.finished:
                self._finish(seq.key, t)

    @staticmethod
    def _emit(req: Any, t: float, first: bool) -> None:
        req.tokens += 1
        if first:
            req.first_token_s = t
        if req.events is not None:
            req.events.put_nowait(1)
