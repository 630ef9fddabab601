"""The raw keep-alive HTTP/1.1 client against real uvicorn servers."""

from __future__ import annotations

import asyncio
import threading

import orjson
import pytest
import uvicorn

from gateway_testkit import ServerThread, chat, echo, emulator, free_port, run
from gpubalance.emulate import EmulatorApp, Engine
from gpubalance.gateway.http1 import Http1Pool, UpstreamConnectError


def test_post_reuses_connections_and_decodes_chunked_bodies() -> None:
    with emulator() as emu:

        async def go() -> None:
            pool = Http1Pool(emu.url)
            for _ in range(3):
                st, ctype, body = await pool.post(
                    "/v1/chat/completions", orjson.dumps(chat(max_tokens=2)), 5.0
                )
                assert st == 200 and ctype == b"application/json"
                assert orjson.loads(body)["usage"]["completion_tokens"] == 2
            assert len(pool._idle) == 1  # one keep-alive connection served all three
            # a streamed (chunked) answer comes back whole and de-chunked
            st, ctype, body = await pool.post(
                "/v1/chat/completions", orjson.dumps(chat(max_tokens=3, stream=True)), 5.0
            )
            assert ctype.startswith(b"text/event-stream")
            assert body.count(b"data: ") == 3 and body.endswith(b"data: [DONE]\n\n")
            pool.close()

        run(go())


def test_idle_connection_closed_by_server_is_not_an_error() -> None:
    port = free_port()
    cfg = uvicorn.Config(
        EmulatorApp(Engine(None), "m"),
        host="127.0.0.1",
        port=port,
        log_level="error",
        timeout_keep_alive=1,
    )
    srv = ServerThread.__new__(ServerThread)
    srv.server, srv.url = uvicorn.Server(cfg), f"http://127.0.0.1:{port}"
    srv.thread = threading.Thread(target=srv.server.run, daemon=True)
    with srv:

        async def go() -> None:
            pool = Http1Pool(srv.url)
            body = orjson.dumps(chat())
            assert (await pool.post("/v1/chat/completions", body, 5.0))[0] == 200
            await asyncio.sleep(1.6)  # the server drops the idle keep-alive connection
            assert (await pool.post("/v1/chat/completions", body, 5.0))[0] == 200

        run(go())


def test_refused_and_timeout_raise_the_right_errors() -> None:
    async def refused() -> None:
        await Http1Pool(f"http://127.0.0.1:{free_port()}").post("/x", b"{}", 1.0)

    with pytest.raises(UpstreamConnectError):
        run(refused())
    with echo() as eb:

        async def slow() -> None:
            await Http1Pool(eb.url + "/sleep/1000").post(
                "/v1/chat/completions", orjson.dumps(chat()), 0.1
            )

        with pytest.raises(TimeoutError):
            run(slow())
