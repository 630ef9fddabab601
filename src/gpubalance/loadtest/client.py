"""Send one request to an OpenAI-compatible endpoint and time it (aiohttp).

Streaming answers are Server-Sent Events: ``data: {json}`` lines ending with
``data: [DONE]``. The first chunk carrying content (``choices[0].delta.content`` for chat,
``choices[0].text`` for completions) marks the time to first token; gaps between later
content chunks are the inter-token latencies (a chunk that carries several tokens counts
as one gap). ``usage`` (asked for with ``stream_options.include_usage``) gives token
counts when the server sends it (a non-streamed answer without ``usage`` is counted as
the ``max_tokens`` asked for). Every failure becomes an error kind (see
:data:`~gpubalance.loadtest.records.ERROR_KINDS`); nothing is raised.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import orjson

from gpubalance.loadtest.endpoint import Endpoint
from gpubalance.loadtest.records import RequestRecord, RequestSpec

if TYPE_CHECKING:  # pragma: no cover
    import aiohttp

__all__ = ["fetch_model_id", "send_one"]

_DETAIL_MAX = 200


class _BadBody(Exception):
    """A 2xx answer that is not OpenAI-shaped."""


class _Disconnect(Exception):
    """The stream ended before ``[DONE]`` or a finish."""


def _content_of(chunk: dict[str, Any], kind: str) -> str:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        raise _BadBody("stream chunk without 'choices'")
    if not choices:
        return ""  # usage-only chunk
    first = choices[0]
    if not isinstance(first, dict):
        raise _BadBody("choice is not an object")
    if kind == "chat":
        delta = first.get("delta") or {}
        text = delta.get("content") if isinstance(delta, dict) else None
    else:
        text = first.get("text")
    return text if isinstance(text, str) else ""


def _check_body(data: Any, kind: str) -> tuple[int | None, int | None]:
    """Validate a non-streamed answer; return (prompt_tokens, completion_tokens) if given."""
    if not isinstance(data, dict):
        raise _BadBody("answer is not a JSON object")
    if "error" in data and "choices" not in data and "data" not in data:
        raise _BadBody(f"error object in 2xx answer: {str(data['error'])[:120]}")
    if kind == "embeddings":
        items = data.get("data")
        if not isinstance(items, list) or not items or "embedding" not in items[0]:
            raise _BadBody("embeddings answer without data[].embedding")
    else:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _BadBody("answer without 'choices'")
    usage = data.get("usage")
    if isinstance(usage, dict):
        p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return (p if isinstance(p, int) else None, c if isinstance(c, int) else None)
    return None, None


async def _read_stream(
    resp: aiohttp.ClientResponse, rec: RequestRecord, kind: str, t0: float
) -> None:
    last: float | None = None
    chunks = 0
    done = False
    async for raw in resp.content:
        line = raw.strip()
        if not line or not line.startswith(b"data:"):
            continue  # blank separators, comments (": ping"), event:/id: fields
        payload = line[5:].strip()
        if payload == b"[DONE]":
            done = True
            break
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise _BadBody(f"stream chunk is not JSON: {payload[:80]!r}") from None
        if not isinstance(chunk, dict):
            raise _BadBody("stream chunk is not a JSON object")
        if "error" in chunk:
            raise _BadBody(f"error in stream: {str(chunk['error'])[:120]}")
        if _content_of(chunk, kind):
            now = time.perf_counter() - t0
            if last is None:
                rec.ttft_s = now - rec.sent_s
            else:
                rec.itl_s.append(now - last)
            last = now
            chunks += 1
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(p, int):
                rec.input_tokens = p
            if isinstance(c, int):
                rec.output_tokens = c
    if not done:
        raise _Disconnect(f"stream ended without [DONE] after {chunks} content chunks")
    if chunks == 0:
        raise _BadBody("stream finished without any content")
    if rec.output_tokens <= 0:
        rec.output_tokens = chunks


async def send_one(
    session: aiohttp.ClientSession, endpoint: Endpoint, spec: RequestSpec, t0: float
) -> RequestRecord:
    """Send ``spec`` now; return its record (never raises, except on cancellation)."""
    import aiohttp

    body = orjson.dumps(endpoint.body(spec.index, spec.input_tokens, spec.output_tokens))
    headers = {"Content-Type": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    rec = RequestRecord(
        index=spec.index,
        scheduled_s=spec.scheduled_s,
        sent_s=time.perf_counter() - t0,
        input_tokens=spec.input_tokens,
    )
    try:
        async with asyncio.timeout(endpoint.timeout_s):
            async with session.post(endpoint.url, data=body, headers=headers) as resp:
                rec.status = resp.status
                if resp.status < 200 or resp.status >= 300:
                    text = (await resp.read())[:_DETAIL_MAX].decode("utf-8", "replace")
                    rec.error_kind, rec.error_detail = "http_status", f"{resp.status}: {text}"
                elif endpoint.streaming:
                    await _read_stream(resp, rec, endpoint.kind, t0)
                    rec.ok = True
                else:
                    raw = await resp.read()
                    try:
                        data = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        raise _BadBody(f"answer is not JSON: {raw[:80]!r}") from None
                    p, c = _check_body(data, endpoint.kind)
                    if p is not None:
                        rec.input_tokens = p
                    if c is not None:
                        rec.output_tokens = c
                    elif endpoint.kind != "embeddings":
                        rec.output_tokens = spec.output_tokens  # no usage: the request's

                    rec.ok = True
    except _BadBody as exc:
        rec.error_kind, rec.error_detail = "bad_body", str(exc)
    except _Disconnect as exc:
        rec.error_kind, rec.error_detail = "disconnect", str(exc)
    except TimeoutError:
        rec.error_kind, rec.error_detail = (
            "timeout",
            f"no complete answer in {endpoint.timeout_s} s",
        )
    except aiohttp.ClientConnectorError as exc:
        rec.error_kind, rec.error_detail = "connect", str(exc)[:_DETAIL_MAX]
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
        rec.error_kind = "disconnect"
        rec.error_detail = f"{type(exc).__name__}: {exc}"[:_DETAIL_MAX]
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        rec.error_kind = "other"
        rec.error_detail = f"{type(exc).__name__}: {exc}"[:_DETAIL_MAX]
    rec.end_s = time.perf_counter() - t0
    if rec.ok and not endpoint.streaming:
        rec.ttft_s = rec.end_s - rec.sent_s
    return rec


async def fetch_model_id(url: str, timeout_s: float = 5.0) -> str | None:
    """The first model id listed at ``<base>/v1/models``, or None if the server cannot be
    reached or does not answer like OpenAI (the load test then reports the failures)."""
    import aiohttp
    from yarl import URL

    base = URL(url)
    path = base.path
    for suffix in ("/chat/completions", "/completions", "/embeddings"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    models = base.with_path(
        path.rstrip("/") + ("/models" if path.endswith("/v1") else "/v1/models")
    )
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.get(models) as resp,
        ):
            if resp.status != 200:
                return None
            data = orjson.loads(await resp.read())
    except (aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError):
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if isinstance(items, list) and items and isinstance(items[0], dict):
        mid = items[0].get("id")
        return mid if isinstance(mid, str) else None
    return None
