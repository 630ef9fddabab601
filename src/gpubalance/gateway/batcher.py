"""Micro-batching of embedding requests.

Compatible requests (same pool, model, encoding format and dimensions, nothing else in the
body, text inputs) arriving within ``max_wait_s`` of the first one are sent upstream as one
request with their inputs concatenated, up to ``max_batch_inputs`` inputs (reaching the cap
sends at once). The upstream answer is split back: each caller gets its own rows, indexed
from 0, and its share of ``usage`` (prompt tokens split in proportion to input characters).
An upstream error is returned to every caller of the batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gpubalance.gateway.config import BatchingConfig
from gpubalance.gateway.responses import error_body
from gpubalance.gateway.runtime import Pool
from gpubalance.gateway.upstream import CallResult

__all__ = ["EmbeddingBatcher", "batch_inputs", "split_embedding_response"]

_BATCHABLE_FIELDS = frozenset({"model", "input", "encoding_format", "dimensions"})

CallFn = Callable[[Pool, str, bytes, float], Awaitable[CallResult]]


def batch_inputs(body: dict[str, Any]) -> list[str] | None:
    """The text inputs of a batchable embedding body, or None when it cannot be batched."""
    if not _BATCHABLE_FIELDS.issuperset(body):
        return None
    inp = body.get("input")
    if isinstance(inp, str):
        return [inp]
    if isinstance(inp, list) and inp and all(isinstance(x, str) for x in inp):
        return inp
    return None


def split_embedding_response(data: dict[str, Any], sizes: list[list[str]]) -> list[bytes]:
    """Split one upstream embeddings response into per-caller responses.

    ``sizes`` holds each caller's inputs in batch order. Raises ValueError when the answer
    does not have one row per input.
    """
    rows = sorted(data.get("data") or [], key=lambda r: r.get("index", 0))
    total = sum(len(s) for s in sizes)
    if len(rows) != total:
        raise ValueError(f"backend returned {len(rows)} embeddings for {total} inputs")
    usage = data.get("usage") or {}
    prompt_total = int(usage.get("prompt_tokens", 0) or 0)
    chars = [sum(len(x) for x in s) for s in sizes]
    all_chars = sum(chars) or 1
    out: list[bytes] = []
    offset = 0
    given = 0
    for k, inputs in enumerate(sizes):
        n = len(inputs)
        part = [dict(r, index=j) for j, r in enumerate(rows[offset : offset + n])]
        offset += n
        if k == len(sizes) - 1:
            tokens = prompt_total - given
        else:
            tokens = round(prompt_total * chars[k] / all_chars)
            given += tokens
        body = {
            "object": "list",
            "data": part,
            "model": data.get("model"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        out.append(orjson.dumps(body))
    return out


@dataclass(eq=False)
class _Batch:
    pool: Pool
    template: dict[str, Any]
    inputs: list[list[str]] = field(default_factory=list)
    futures: list[asyncio.Future[CallResult]] = field(default_factory=list)
    cost_s: float = 0.0
    n: int = 0
    timer: asyncio.TimerHandle | None = None


class EmbeddingBatcher:
    """Coalesces embedding requests; ``call`` sends one (merged) request upstream."""

    def __init__(self, call: CallFn, config: BatchingConfig, on_batch: Callable[[int], None]):
        self._call = call
        self.config = config
        self._on_batch = on_batch
        self._pending: dict[tuple[Any, ...], _Batch] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(
        self, pool: Pool, body: dict[str, Any], inputs: list[str], cost_s: float
    ) -> CallResult:
        """Queue one request's inputs; resolves with that request's own response."""
        loop = asyncio.get_running_loop()
        key = (pool.name, body.get("model"), body.get("encoding_format"), body.get("dimensions"))
        batch = self._pending.get(key)
        if batch is None:
            template = {k: v for k, v in body.items() if k != "input"}
            batch = self._pending[key] = _Batch(pool, template)
            batch.timer = loop.call_later(self.config.max_wait_s, self._flush, key)
        fut: asyncio.Future[CallResult] = loop.create_future()
        batch.inputs.append(inputs)
        batch.futures.append(fut)
        batch.cost_s += cost_s
        batch.n += len(inputs)
        if batch.n >= self.config.max_batch_inputs:
            self._flush(key)
        return await fut

    def _flush(self, key: tuple[Any, ...]) -> None:
        batch = self._pending.pop(key, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: _Batch) -> None:
        merged = dict(batch.template)
        merged["input"] = [x for inp in batch.inputs for x in inp]
        self._on_batch(batch.n)
        try:
            res = await self._call(batch.pool, "/v1/embeddings", orjson.dumps(merged), batch.cost_s)
            if res.status != 200 or len(batch.futures) == 1:
                parts = None
            else:
                try:
                    parts = split_embedding_response(orjson.loads(res.body), batch.inputs)
                except (ValueError, TypeError, AttributeError) as exc:
                    res = CallResult(
                        502,
                        error_body(str(exc), "bad_gateway", "bad_backend_response"),
                        backend=res.backend,
                        error="bad_backend_response",
                    )
                    parts = None
            for k, fut in enumerate(batch.futures):
                if fut.done():
                    continue
                if parts is None:
                    fut.set_result(res)
                else:
                    fut.set_result(
                        CallResult(200, parts[k], res.content_type, res.backend, res.ttft_s)
                    )
        except BaseException as exc:  # never leave a caller waiting
            for fut in batch.futures:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def close(self) -> None:
        for key in list(self._pending):
            self._flush(key)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
