"""Helpers for the gateway and emulator tests: real uvicorn servers on loopback ports,
run in background threads (or subprocesses), and a small aiohttp client."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import aiohttp
import orjson
import uvicorn

from gpubalance.emulate import EmulatorApp, Engine
from gpubalance.gateway import GatewayApp, GatewayConfig
from gpubalance.loadtest.echo_server import EchoApp
from gpubalance.sim.replica import Replica
from gpubalance.sim.step import LinearStepTime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """uvicorn serving ``app`` on 127.0.0.1:<free port> in a thread (its own event loop)."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.app = app
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            loop="asyncio",
            http="httptools",
            lifespan="on",
            log_level="error",
            access_log=False,
        )
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def emulator(
    model: str = "m",
    *,
    base_s: float | None = None,
    max_num_seqs: int = 64,
    kv_tokens: int = 1 << 20,
) -> ServerThread:
    """Emulator with a LinearStepTime of ``base_s`` seconds per iteration (None: instant)."""
    replica = None
    if base_s is not None:
        replica = Replica(
            LinearStepTime(base_s=base_s),
            kv_capacity_tokens=kv_tokens,
            max_num_seqs=max_num_seqs,
            max_batched_tokens=8192,
        )
    return ServerThread(EmulatorApp(Engine(replica), model))


def echo() -> ServerThread:
    return ServerThread(EchoApp())


def gateway(data: dict[str, Any], **kw: Any) -> ServerThread:
    cfg = GatewayConfig.model_validate(data)
    return ServerThread(GatewayApp(cfg, install_signal_handlers=False, **kw))


def chat(model: str = "m", max_tokens: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "hello world"}],
        "max_tokens": max_tokens,
        **extra,
    }


async def post(
    session: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    h = {"content-type": "application/json", **(headers or {})}
    async with session.post(url, data=data, headers=h) as r:
        raw = await r.read()
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parsed = raw
        return r.status, dict(r.headers), parsed


def run(coro: Any) -> Any:
    return asyncio.run(coro)
