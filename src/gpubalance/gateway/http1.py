"""A minimal keep-alive HTTP/1.1 client for the gateway's non-streaming hot path.

aiohttp's client costs about as much CPU per request as all of the gateway's own logic;
for plain-HTTP backends this client sends a pre-built request head on a pooled
``asyncio.Protocol`` connection and parses the answer with httptools (llhttp, the parser
uvicorn uses), handling Content-Length and chunked bodies. Streaming, TLS and health
checks stay on aiohttp.

Errors: :class:`UpstreamConnectError` (could not connect, or the connection broke before a
complete answer: safe to retry elsewhere) and :class:`TimeoutError` (no complete answer in
time). A request that fails on a reused keep-alive connection before any response byte
(the server closed it while idle) is retried once on a fresh connection.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httptools

__all__ = ["Http1Pool", "UpstreamConnectError"]


class UpstreamConnectError(ConnectionError):
    """Connecting failed, or the connection broke before the answer was complete."""


class _Conn(asyncio.Protocol):
    __slots__ = (
        "_ctype",
        "_got_bytes",
        "_parts",
        "_status",
        "closed",
        "fut",
        "keep_alive",
        "parser",
        "transport",
    )

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.fut: asyncio.Future[tuple[int, bytes, bytes]] | None = None
        self.closed = False
        self.keep_alive = True
        self._parts: list[bytes] = []
        self._status = 0
        self._ctype = b"application/json"
        self._got_bytes = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UpstreamConnectError(f"bad HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(UpstreamConnectError("connection closed by the backend"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 12 and name.lower() == b"content-type":
            self._ctype = value

    def on_headers_complete(self) -> None:
        self._status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._parts.append(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        fut = self.fut
        if fut is not None and not fut.done():
            parts = self._parts
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            fut.set_result((self._status, self._ctype, body))

    # use
    def _fail(self, exc: Exception) -> None:
        fut = self.fut
        if fut is not None and not fut.done():
            fut.set_exception(exc)

    def request(self, data: bytes) -> asyncio.Future[tuple[int, bytes, bytes]]:
        self._parts = []
        self._ctype = b"application/json"
        self._got_bytes = False
        self.fut = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(data)
        return self.fut

    def timeout(self) -> None:
        fut = self.fut
        if fut is not None and not fut.done():
            fut.set_exception(TimeoutError("backend did not answer in time"))
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Http1Pool:
    """Keep-alive connections to one ``http://host:port[/prefix]`` backend."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        max_idle: int = 256,
        connect_timeout_s: float = 2.0,
    ) -> None:
        u = urlsplit(base_url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"Http1Pool needs an http:// URL, got {base_url!r}")
        self.host = u.hostname
        self.port = u.port or 80
        self.prefix = u.path.rstrip("/").encode()
        host_hdr = u.netloc.encode()
        extra = b"".join(f"{k}: {v}\r\n".encode() for k, v in (headers or {}).items())
        self._head_tail = b" HTTP/1.1\r\nHost: " + host_hdr + b"\r\n" + extra
        self.max_idle = max_idle
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[_Conn] = []
        self._heads: dict[str, bytes] = {}

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(_Conn, self.host, self.port), self.connect_timeout_s
            )
        except (OSError, TimeoutError) as exc:
            raise UpstreamConnectError(
                f"cannot connect to {self.host}:{self.port}: {exc}"
            ) from None
        return conn

    async def post(self, path: str, body: bytes, timeout_s: float) -> tuple[int, bytes, bytes]:
        """POST ``body`` (JSON) to ``path``; returns (status, content-type, body)."""
        head = self._heads.get(path)
        if head is None:
            head = self._heads[path] = (
                b"POST "
                + self.prefix
                + path.encode()
                + self._head_tail
                + b"Content-Type: application/json\r\nContent-Length: "
            )
        data = head + str(len(body)).encode() + b"\r\n\r\n" + body
        loop = asyncio.get_running_loop()
        for _ in range(2):
            conn = None
            while self._idle:
                c = self._idle.pop()
                if not c.closed:
                    conn = c
                    break
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            fut = conn.request(data)
            timer = loop.call_later(timeout_s, conn.timeout)
            try:
                result = await fut
            except UpstreamConnectError:
                conn.close()
                if reused and not conn._got_bytes:
                    continue  # stale keep-alive connection: once more on a fresh one
                raise
            except BaseException:
                conn.close()
                raise
            finally:
                timer.cancel()
            if conn.keep_alive and not conn.closed and len(self._idle) < self.max_idle:
                self._idle.append(conn)
            else:
                conn.close()
            return result
        raise UpstreamConnectError("connection closed by the backend")  # pragma: no cover

    def close(self) -> None:
        """Close idle connections (in-flight ones close when their request ends)."""
        for c in self._idle:
            c.close()
        self._idle.clear()
