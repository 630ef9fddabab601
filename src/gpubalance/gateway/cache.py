"""Response cache for deterministic requests: in memory (LRU, TTL, size bounds) and Redis.

Only complete 200 responses of deterministic requests are stored (embeddings; completions
and chat with temperature 0, n = 1, not streamed). Keys are the SHA-256 of the endpoint
and the request body with sorted keys, so equal requests hit whatever their key order.
With Redis, the memory cache is a first level in front of the shared store.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Any

import orjson

__all__ = ["MemoryCache", "RedisCache", "ResponseCache", "cache_key", "is_deterministic"]


def is_deterministic(endpoint: str, body: dict[str, Any]) -> bool:
    """Whether the same body always gives the same answer (so it may be cached)."""
    if endpoint == "embeddings":
        return True
    if body.get("stream"):
        return False
    if body.get("n", 1) not in (1, None):
        return False
    temp = body.get("temperature", 1.0)
    return isinstance(temp, int | float) and temp == 0


def cache_key(endpoint: str, body: dict[str, Any]) -> str:
    """Hex SHA-256 of the endpoint and canonical (sorted-key) body."""
    h = hashlib.sha256(endpoint.encode())
    h.update(b"\0")
    h.update(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()


class MemoryCache:
    """LRU cache bounded by entry count and total bytes; entries expire after ``ttl_s``."""

    def __init__(self, ttl_s: float, max_entries: int, max_bytes: int) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._d: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._d)

    def get(self, key: str, now: float | None = None) -> bytes | None:
        item = self._d.get(key)
        if item is None:
            return None
        t = time.monotonic() if now is None else now
        if item[0] <= t:
            del self._d[key]
            self.bytes -= len(item[1])
            return None
        self._d.move_to_end(key)
        return item[1]

    def put(
        self, key: str, value: bytes, now: float | None = None, ttl_s: float | None = None
    ) -> None:
        if len(value) > self.max_bytes:
            return
        t = time.monotonic() if now is None else now
        old = self._d.pop(key, None)
        if old is not None:
            self.bytes -= len(old[1])
        self._d[key] = (t + (self.ttl_s if ttl_s is None else ttl_s), value)
        self.bytes += len(value)
        while len(self._d) > self.max_entries or self.bytes > self.max_bytes:
            _, (_, v) = self._d.popitem(last=False)
            self.bytes -= len(v)


class RedisCache:
    """Shared cache in Redis (redis-py asyncio client); values expire by Redis PX TTL."""

    def __init__(self, url: str, namespace: str, ttl_s: float) -> None:
        self.url = url
        self.namespace = namespace
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self._client: Any = None

    async def connect(self) -> None:
        import redis.asyncio as aioredis

        self._client = aioredis.Redis.from_url(self.url, socket_timeout=0.5)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def get(self, key: str) -> tuple[bytes, float] | None:
        """Value and its remaining TTL in seconds, or None."""
        pipe = self._client.pipeline(transaction=False)
        pipe.get(self.namespace + key)
        pipe.pttl(self.namespace + key)
        value, pttl = await pipe.execute()
        if value is None:
            return None
        return bytes(value), max(0.001, pttl / 1000.0)

    async def put(self, key: str, value: bytes) -> None:
        await self._client.set(self.namespace + key, value, px=self.ttl_ms)


class ResponseCache:
    """Two-level cache: memory first, then Redis when configured. Redis errors count as
    misses (reported through ``on_error``), never as failed requests."""

    def __init__(self, memory: MemoryCache, redis: RedisCache | None = None) -> None:
        self.memory = memory
        self.redis = redis
        self.redis_errors = 0

    async def get(self, key: str) -> tuple[bytes, str] | None:
        """(response body, where: "memory" or "redis") or None."""
        v = self.memory.get(key)
        if v is not None:
            return v, "memory"
        if self.redis is None:
            return None
        try:
            got = await self.redis.get(key)
        except Exception:  # redis down: serve without cache
            self.redis_errors += 1
            return None
        if got is None:
            return None
        self.memory.put(key, got[0], ttl_s=got[1])
        return got[0], "redis"

    async def put(self, key: str, value: bytes) -> None:
        self.memory.put(key, value)
        if self.redis is not None:
            try:
                await self.redis.put(key, value)
            except Exception:
                self.redis_errors += 1
