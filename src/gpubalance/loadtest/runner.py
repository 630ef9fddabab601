"""Run a schedule against an endpoint: open loop (on time) or closed loop (concurrency).

Open loop: one dispatcher walks the schedule and starts each request at its scheduled time
whether or not earlier ones have been answered, so a slow server cannot slow the offered
load (no coordinated omission). It sleeps until ``spin_s`` before the due time, then yields
to the event loop (``asyncio.sleep(0)``) until the due time, which keeps send lateness well
under a millisecond although event-loop timers only have millisecond resolution. A request
that could not be sent on time (the loop was busy) is sent as soon as possible and its
lateness (``sent_s - scheduled_s``) is recorded.

Closed loop: ``concurrency`` workers each send, wait for the answer, and send the next.
One aiohttp session per run with a connection pool sized to the concurrency (open loop:
``max_connections``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gpubalance.loadtest.client import send_one
from gpubalance.loadtest.endpoint import Endpoint
from gpubalance.loadtest.records import RequestRecord, RequestSpec

if TYPE_CHECKING:  # pragma: no cover
    import aiohttp

__all__ = ["OnDone", "run_async", "run_closed_loop", "run_open_loop"]

OnDone = Callable[[RequestRecord], None]
T = TypeVar("T")


def _session(pool: int, endpoint: Endpoint) -> aiohttp.ClientSession:
    import aiohttp

    connector = aiohttp.TCPConnector(
        limit=pool, limit_per_host=pool, ttl_dns_cache=300, enable_cleanup_closed=False
    )
    # per-request timeouts are applied by send_one; the session's own total is a backstop
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=endpoint.timeout_s)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        auto_decompress=True,
        skip_auto_headers=("User-Agent",),
    )


async def run_open_loop(
    endpoint: Endpoint,
    specs: Sequence[RequestSpec],
    *,
    max_connections: int = 1024,
    spin_s: float = 0.0005,
    on_done: OnDone | None = None,
    label: str = "",
) -> list[RequestRecord]:
    """Send ``specs`` at their ``scheduled_s`` (seconds after start); return their records
    in schedule order.

    Args:
        max_connections: connection pool size; a request that finds the pool full waits for
            a connection, and that wait counts in its latency (it was sent on time).
        spin_s: how long before a due time the dispatcher stops sleeping and polls.
    """
    loop = asyncio.get_running_loop()
    records: list[RequestRecord | None] = [None] * len(specs)

    async def one(slot: int, spec: RequestSpec, session: aiohttp.ClientSession, t0: float) -> None:
        rec = await send_one(session, endpoint, spec, t0)
        rec.run = label
        records[slot] = rec
        if on_done is not None:
            on_done(rec)

    async with _session(max_connections, endpoint) as session:
        tasks: list[asyncio.Task[None]] = []
        t0 = time.perf_counter()
        clock = time.perf_counter
        for slot, spec in enumerate(specs):
            due = t0 + spec.scheduled_s
            wait = due - clock()
            if wait > spin_s:
                await asyncio.sleep(wait - spin_s)
            while clock() < due:
                await asyncio.sleep(0)
            tasks.append(loop.create_task(one(slot, spec, session, t0)))
        if tasks:
            await asyncio.gather(*tasks)
    return [r for r in records if r is not None]


async def run_closed_loop(
    endpoint: Endpoint,
    specs: Iterable[RequestSpec],
    concurrency: int,
    *,
    duration_s: float | None = None,
    on_done: OnDone | None = None,
    label: str = "",
) -> list[RequestRecord]:
    """Keep ``concurrency`` requests in flight until ``specs`` run out (or ``duration_s``
    passes); ``scheduled_s`` of each record is its send time. Records in completion order."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    records: list[RequestRecord] = []
    it = iter(specs)

    async def worker(session: aiohttp.ClientSession, t0: float) -> None:
        for spec in it:
            now = time.perf_counter() - t0
            if duration_s is not None and now >= duration_s:
                return
            rec = await send_one(
                session,
                endpoint,
                RequestSpec(spec.index, now, spec.input_tokens, spec.output_tokens),
                t0,
            )
            rec.run = label
            records.append(rec)
            if on_done is not None:
                on_done(rec)

    async with _session(concurrency, endpoint) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session, t0) for _ in range(concurrency)))
    return records


def run_async(coro: Coroutine[Any, Any, T], *, use_uvloop: bool = True) -> T:
    """Run ``coro`` to completion on a new event loop (uvloop when installed and asked)."""
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(coro)
    return asyncio.run(coro)
