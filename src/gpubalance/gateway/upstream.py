"""Calls to backends with retry on another backend, passive ejection and streaming.

Retry rule: a connection failure, or a 5xx status before any byte went to the client, is
retried on another backend of the pool (up to ``max_attempts`` backends). A whole-request
timeout is answered 504 and not retried (the backend may still be working). Once a stream
has started sending to the client it is never retried; if the backend breaks mid-stream the
client gets a final SSE ``error`` event, and the failure is counted and logged.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from gpubalance.gateway.config import GatewayConfig
from gpubalance.gateway.http1 import Http1Pool, UpstreamConnectError
from gpubalance.gateway.metrics import GatewayMetrics
from gpubalance.gateway.responses import error_body
from gpubalance.gateway.runtime import Backend, Pool
from gpubalance.gateway.types import Receive, Send
from gpubalance.route import NoBackendAvailable

__all__ = ["CallResult", "Upstream", "open_fast_pool", "open_session"]

_USAGE_OUT = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')


@dataclass(slots=True)
class CallResult:
    """Outcome of one proxied request (after retries)."""

    status: int
    body: bytes
    content_type: bytes = b"application/json"
    backend: str = "-"
    ttft_s: float | None = None
    error: str | None = None
    output_tokens: int | None = None
    streamed: bool = False


def open_session(backend: Backend, config: GatewayConfig) -> aiohttp.ClientSession:
    """A keep-alive connection pool for one backend."""
    conn = aiohttp.TCPConnector(
        limit=config.limits.max_connections_per_backend,
        keepalive_timeout=60.0,
        ttl_dns_cache=300,
    )
    headers = {"content-type": "application/json"}
    if backend.config.api_key:
        headers["authorization"] = f"Bearer {backend.config.api_key}"
    return aiohttp.ClientSession(
        connector=conn,
        headers=headers,
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
    )


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def open_fast_pool(backend: Backend, config: GatewayConfig) -> Http1Pool | None:
    """The raw HTTP/1.1 pool for plain-http backends (None for https: aiohttp serves it)."""
    if not backend.url.startswith("http://"):
        return None
    headers = {}
    if backend.config.api_key:
        headers["Authorization"] = f"Bearer {backend.config.api_key}"
    return Http1Pool(
        backend.url,
        headers=headers,
        max_idle=config.limits.max_connections_per_backend,
        connect_timeout_s=config.limits.connect_timeout_s,
    )


def _output_tokens(tail: bytes) -> int | None:
    found = _USAGE_OUT.findall(tail)
    return int(found[-1]) if found else None


class Upstream:
    """Sends requests of a pool to its backends (policy choice, retries, breaker)."""

    def __init__(self, config: GatewayConfig, metrics: GatewayMetrics) -> None:
        self.set_config(config)
        self.metrics = metrics

    def set_config(self, config: GatewayConfig) -> None:
        lim = config.limits
        self.max_attempts = lim.max_attempts
        self.timeout_s = lim.request_timeout_s
        self.connect_timeout_s = lim.connect_timeout_s
        self.threshold = config.health.failure_threshold
        self.eject_s = config.health.eject_s
        self._timeout = aiohttp.ClientTimeout(
            total=lim.request_timeout_s, connect=lim.connect_timeout_s
        )

    def _timeout_for(self, timeout_s: float | None) -> aiohttp.ClientTimeout:
        if timeout_s is None or timeout_s >= self.timeout_s:
            return self._timeout
        return aiohttp.ClientTimeout(
            total=timeout_s, connect=min(timeout_s, self.connect_timeout_s)
        )

    def _fail(self, b: Backend, kind: str) -> None:
        self.metrics.error(kind)
        b.record_failure(self.threshold, self.eject_s)

    def _connect_failed(self, b: Backend) -> CallResult:
        """Count a connection failure on ``b``; the 502 answered if no retry succeeds."""
        self._fail(b, "connect")
        return CallResult(502, b"", backend=b.name, error="connect")

    def _timed_out(self, b: Backend) -> CallResult:
        """Count a timeout on ``b``; the 504 answered (a timed-out request is not retried)."""
        self._fail(b, "timeout")
        msg = f"backend {b.name} did not answer within the request timeout"
        return CallResult(
            504, error_body(msg, "timeout_error", "timeout"), backend=b.name, error="timeout"
        )

    async def _send_once(
        self, b: Backend, path: str, body: bytes, timeout_s: float | None
    ) -> tuple[int, bytes, bytes]:
        """One POST to one backend: (status, content-type, body). Raises
        UpstreamConnectError (retry elsewhere) or TimeoutError (answer 504)."""
        if b.fast is not None:
            return await b.fast.post(path, body, self.timeout_s if timeout_s is None else timeout_s)
        try:
            async with b.session.post(
                b.url + path, data=body, timeout=self._timeout_for(timeout_s)
            ) as resp:
                data = await resp.read()
                ctype = resp.headers.get("content-type", "application/json").encode()
                return resp.status, ctype, data
        except aiohttp.ConnectionTimeoutError as exc:
            raise UpstreamConnectError(str(exc)) from None
        except TimeoutError:
            raise
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamConnectError(str(exc)) from None

    async def call(
        self, pool: Pool, path: str, body: bytes, cost_s: float, timeout_s: float | None = None
    ) -> CallResult:
        """Non-streaming call; the whole response is read before it is returned."""
        exclude: set[int] | None = None
        last: CallResult | None = None
        t0 = time.perf_counter()
        for attempt in range(self.max_attempts):
            if attempt:
                self.metrics.retries.labels(pool.name).inc()
            try:
                i = pool.choose(cost_s, exclude)
            except NoBackendAvailable:
                break
            b = pool.backends[i]
            st = b.state
            st.start(cost_s)
            b.sent_total += 1
            try:
                status, ctype, data = await self._send_once(b, path, body, timeout_s)
            except UpstreamConnectError:
                last = self._connect_failed(b)
            except TimeoutError:
                return self._timed_out(b)
            else:
                if status < 500:
                    b.record_success()
                    ttft = time.perf_counter() - t0
                    out = _output_tokens(data[-256:]) if status == 200 else None
                    return CallResult(status, data, ctype, b.name, ttft, None, out)
                self._fail(b, "upstream_5xx")
                last = CallResult(status, data, ctype, b.name, error="upstream_5xx")
            finally:
                st.finish(cost_s)
            if exclude is None:
                exclude = set()
            exclude.add(i)
            if len(exclude) >= len(pool.backends):
                break
        return self._exhausted(pool, last)

    def _exhausted(self, pool: Pool, last: CallResult | None) -> CallResult:
        if last is not None and last.status >= 500 and last.body:
            return last  # the backend's own 5xx answer
        if last is None:
            self.metrics.error("no_backend")
            msg = f"no healthy backend in pool {pool.name!r}"
            return CallResult(
                503, error_body(msg, "service_unavailable", "no_backend"), error="no_backend"
            )
        msg = f"could not reach a backend in pool {pool.name!r} (last tried {last.backend})"
        return CallResult(
            502,
            error_body(msg, "bad_gateway", "backend_unreachable"),
            backend=last.backend,
            error=last.error,
        )

    async def stream(
        self,
        pool: Pool,
        path: str,
        body: bytes,
        cost_s: float,
        send: Send,
        timeout_s: float | None = None,
        receive: Receive | None = None,
    ) -> CallResult:
        """Streaming call: chunks go to ``send`` as they arrive. Returns the outcome; when
        ``streamed`` is False nothing was sent and the caller sends ``body``. With
        ``receive``, a client that disconnects mid-stream ends the upstream call at once."""
        timeout = self._timeout_for(timeout_s)
        exclude: set[int] | None = None
        last: CallResult | None = None
        t0 = time.perf_counter()
        for _attempt in range(self.max_attempts):
            try:
                i = pool.choose(cost_s, exclude)
            except NoBackendAvailable:
                break
            b = pool.backends[i]
            st = b.state
            st.start(cost_s)
            b.sent_total += 1
            resp: Any = None
            try:
                resp = await b.session.post(b.url + path, data=body, timeout=timeout)
                if resp.status >= 500:
                    data = await resp.read()
                    ctype = resp.headers.get("content-type", "application/json").encode()
                    self._fail(b, "upstream_5xx")
                    last = CallResult(resp.status, data, ctype, b.name, error="upstream_5xx")
                elif resp.status != 200:
                    data = await resp.read()
                    ctype = resp.headers.get("content-type", "application/json").encode()
                    b.record_success()
                    return CallResult(resp.status, data, ctype, b.name)
                else:
                    b.record_success()
                    return await self._pipe(resp, b, send, t0, receive)
            except aiohttp.ConnectionTimeoutError:
                last = self._connect_failed(b)
            except TimeoutError:
                return self._timed_out(b)
            except (aiohttp.ClientError, OSError):
                last = self._connect_failed(b)
            finally:
                st.finish(cost_s)
                if resp is not None:
                    resp.release()
            if exclude is None:
                exclude = set()
            exclude.add(i)
            if len(exclude) >= len(pool.backends):
                break
            self.metrics.retries.labels(pool.name).inc()
        return self._exhausted(pool, last)

    async def _pipe(
        self, resp: Any, b: Backend, send: Send, t0: float, receive: Receive | None
    ) -> CallResult:
        ctype = resp.headers.get("content-type", "text/event-stream").encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", ctype),
                    (b"cache-control", b"no-cache"),
                    (b"x-gpubalance-backend", b.name.encode()),
                ],
            }
        )
        ttft: float | None = None
        tail = b""
        error: str | None = None
        state = {"finished": False}
        me = asyncio.current_task()
        watcher = None
        if receive is not None and me is not None:
            watcher = asyncio.ensure_future(_wait_disconnect(receive))

            def _client_left(t: asyncio.Future[None]) -> None:
                if not t.cancelled() and not state["finished"]:
                    me.cancel()

            watcher.add_done_callback(_client_left)
        try:
            try:
                async for chunk in resp.content.iter_any():
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    tail = (tail + chunk)[-512:]
            except (aiohttp.ClientError, OSError, TimeoutError, asyncio.IncompleteReadError) as e:
                error = "stream_broken"
                self._fail(b, error)
                msg = f"backend {b.name} broke the stream: {type(e).__name__}"
                event = b"data: " + error_body(msg, "stream_error", "stream_broken") + b"\n\n"
                await send({"type": "http.response.body", "body": event, "more_body": True})
            except asyncio.CancelledError:
                if watcher is None or not watcher.done() or watcher.cancelled() or me is None:
                    raise
                me.uncancel()  # the client went away: stop reading the backend, send nothing
                self.metrics.error("client_disconnected")
                return CallResult(499, b"", ctype, b.name, ttft, "client_disconnected", None, True)
            state["finished"] = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return CallResult(200, b"", ctype, b.name, ttft, error, _output_tokens(tail), True)
        finally:
            state["finished"] = True
            if watcher is not None:
                watcher.cancel()
