"""An instant OpenAI-compatible backend with exact delays and injectable faults.

Used by the load tester's tests and benchmarks as a server whose behaviour is known by
construction. A plain ASGI app (run it under uvicorn: ``python -m
gpubalance.loadtest.echo_server --port P``). The path chooses the behaviour, then an
OpenAI path follows (``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``):

- ``/v1/...``: answer at once; chat/completions produce ``max_tokens`` tokens (streamed
  one per SSE chunk when ``stream`` is true, with a final ``usage`` chunk).
- ``/sleep/<ms>/v1/...``: wait ``<ms>`` milliseconds before the first token.
- ``/gap/<ms>/v1/...``: wait ``<ms>`` milliseconds between streamed tokens.
- ``/fail500/v1/...``: HTTP 500 with an OpenAI error body.
- ``/nonjson/v1/...``: HTTP 200 with an HTML body.
- ``/notopenai/v1/...``: HTTP 200 with JSON that has no ``choices``/``data``.
- ``/disconnect/v1/...``: stream half the tokens, then close the connection.
- ``/flaky/<k>/v1/...``: every ``k``-th request (server-wide count) gets HTTP 503.

``/health`` (after any prefixes) answers 200. Prefixes combine left to right
(``/sleep/50/gap/5/v1/chat/completions``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from typing import Any

import orjson

from gpubalance.asgi import Receive, Scope, Send, run_lifespan

__all__ = ["EchoApp", "main"]


_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class _Options:
    __slots__ = ("delay_s", "disconnect", "fail", "flaky_k", "gap_s", "nonjson", "notopenai")

    def __init__(self) -> None:
        self.delay_s = 0.0
        self.gap_s = 0.0
        self.fail = False
        self.nonjson = False
        self.notopenai = False
        self.disconnect = False
        self.flaky_k = 0


def _parse_path(path: str) -> tuple[_Options, str] | None:
    opts = _Options()
    parts = [p for p in path.split("/") if p]
    i = 0
    while i < len(parts) and parts[i] not in ("v1", "health"):
        word = parts[i]
        if word in ("sleep", "gap", "flaky") and i + 1 < len(parts):
            try:
                value = float(parts[i + 1])
            except ValueError:
                return None
            if word == "sleep":
                opts.delay_s = value / 1000.0
            elif word == "gap":
                opts.gap_s = value / 1000.0
            else:
                opts.flaky_k = int(value)
            i += 2
            continue
        if word == "fail500":
            opts.fail = True
        elif word == "nonjson":
            opts.nonjson = True
        elif word == "notopenai":
            opts.notopenai = True
        elif word == "disconnect":
            opts.disconnect = True
        else:
            return None
        i += 1
    return opts, "/" + "/".join(parts[i:])


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body", False):
            return b"".join(chunks)


async def _respond(send: Send, status: int, body: bytes, headers: list[Any] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers or _JSON})
    await send({"type": "http.response.body", "body": body})


class EchoApp:
    """The ASGI app (see module doc). Holds only a request counter for ``flaky``."""

    def __init__(self) -> None:
        self._count = itertools.count(1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        parsed = _parse_path(scope["path"])
        if parsed is None:
            await _respond(send, 404, b'{"error":{"message":"not found"}}')
            return
        opts, route = parsed
        if route == "/health":
            await _respond(send, 200, b'{"status":"ok"}')
            return
        if route == "/v1/models":
            await _respond(send, 200, b'{"object":"list","data":[{"id":"echo","object":"model"}]}')
            return
        if route not in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings"):
            await _respond(send, 404, b'{"error":{"message":"not found"}}')
            return
        raw = await _read_body(receive)
        n = next(self._count)
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            await _respond(send, 400, b'{"error":{"message":"body is not JSON"}}')
            return
        if opts.flaky_k and n % opts.flaky_k == 0:
            await _respond(send, 503, b'{"error":{"message":"flaky"}}')
            return
        if opts.delay_s > 0:
            await asyncio.sleep(opts.delay_s)
        if opts.fail:
            await _respond(send, 500, b'{"error":{"message":"injected failure"}}')
            return
        if opts.nonjson:
            await _respond(send, 200, b"<html>oops</html>", [(b"content-type", b"text/html")])
            return
        if opts.notopenai:
            await _respond(send, 200, b'{"hello":"world"}')
            return
        prompt_tokens = _count_prompt_tokens(body)
        if route == "/v1/embeddings":
            out = {
                "object": "list",
                "data": [{"object": "embedding", "index": 0, "embedding": [0.0, 1.0]}],
                "model": body.get("model", "echo"),
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            }
            await _respond(send, 200, orjson.dumps(out))
            return
        chat = route == "/v1/chat/completions"
        n_out = int(body.get("max_tokens") or 16)
        if body.get("stream"):
            await self._stream(send, chat, n_out, prompt_tokens, opts)
            return
        text = " tok" * n_out
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n_out,
            "total_tokens": prompt_tokens + n_out,
        }
        await _respond(
            send, 200, orjson.dumps({"id": f"echo-{n}", "choices": [choice], "usage": usage})
        )

    async def _stream(
        self, send: Send, chat: bool, n_out: int, prompt_tokens: int, opts: _Options
    ) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        stop_at = n_out // 2 if opts.disconnect else n_out
        for i in range(stop_at):
            if i > 0 and opts.gap_s > 0:
                await asyncio.sleep(opts.gap_s)
            choice: dict[str, Any] = {"index": 0, "finish_reason": None}
            if chat:
                choice["delta"] = {"content": " tok"}
            else:
                choice["text"] = " tok"
            chunk = orjson.dumps({"choices": [choice]})
            await send(
                {
                    "type": "http.response.body",
                    "body": b"data: " + chunk + b"\n\n",
                    "more_body": True,
                }
            )
        if opts.disconnect:
            raise ConnectionAbortedError("injected mid-stream disconnect")
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n_out,
            "total_tokens": prompt_tokens + n_out,
        }
        tail = b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\ndata: [DONE]\n\n"
        await send({"type": "http.response.body", "body": tail})


def _count_prompt_tokens(body: dict[str, Any]) -> int:
    """Whitespace-separated words of the prompt (the synthesised prompts are one token
    per word, plus a few for the tag)."""
    if "messages" in body:
        text = " ".join(str(m.get("content", "")) for m in body.get("messages") or [])
    else:
        value = body.get("prompt", body.get("input", ""))
        text = " ".join(value) if isinstance(value, list) else str(value)
    return len(text.split())


def main(argv: list[str] | None = None) -> None:
    """Serve :class:`EchoApp` under uvicorn on 127.0.0.1."""
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args(argv)
    uvicorn.run(
        EchoApp(),
        host=args.host,
        port=args.port,
        log_level="critical",  # injected disconnects would log a traceback each
        access_log=False,
        lifespan="on",
        loop="auto",
        http="auto",
        backlog=4096,
    )


if __name__ == "__main__":  # pragma: no cover
    main()
