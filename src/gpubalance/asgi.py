"""Plain-ASGI plumbing shared by every server in gpubalance (gateway, emulator, MiniLM
backend, echo backend): type aliases as in ``starlette.types`` and the lifespan protocol.

Internal module: no framework, so each server's hot path stays a plain coroutine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send", "run_lifespan"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def run_lifespan(
    receive: Receive,
    send: Send,
    startup: Callable[[], Awaitable[None]] | None = None,
    shutdown: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Answer the ASGI lifespan messages: run ``startup`` (a failure is reported to the
    server as ``lifespan.startup.failed`` with its message) and ``shutdown``."""
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            if startup is not None:
                try:
                    await startup()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            if shutdown is not None:
                await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
