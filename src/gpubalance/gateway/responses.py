"""Small ASGI response helpers and OpenAI-style error bodies."""

from __future__ import annotations

import orjson

from gpubalance.gateway.types import Send

__all__ = ["JSON_HEADERS", "error_body", "send_bytes", "send_error"]

JSON_HEADERS: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]


def error_body(message: str, type_: str, code: str | None = None) -> bytes:
    """``{"error": {"message", "type", "code"}}`` as bytes (the OpenAI error shape)."""
    return orjson.dumps({"error": {"message": message, "type": type_, "code": code}})


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes = b"application/json",
) -> None:
    """Send a complete response with content-length."""
    h = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if headers:
        h.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": h})
    await send({"type": "http.response.body", "body": body})


async def send_error(
    send: Send,
    status: int,
    message: str,
    type_: str,
    code: str | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send an OpenAI-style error response."""
    await send_bytes(send, status, error_body(message, type_, code), headers)
