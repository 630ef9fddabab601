"""The gateway as a plain ASGI application (no framework on the hot path).

Endpoints: ``POST /v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``,
``GET /v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus) and, with the admin
key, ``GET /admin/state``, ``POST /admin/backend`` (drain / weight) and
``POST /admin/reload``. Lifespan startup opens the backend connection pools, the cache
and the background tasks (health checks, metric scrapes, access-log flushes); SIGHUP
reloads the config file.

A client may lower (never raise) the configured request timeout for one request with the
header ``x-gpubalance-timeout-s: <seconds>``. Responses carry ``x-gpubalance-backend``
(the backend's configured name, never its address) and ``x-gpubalance-cache: hit`` when
served from the cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from gpubalance.asgi import Receive, Scope, Send, run_lifespan
from gpubalance.gateway.accesslog import AccessLog
from gpubalance.gateway.batcher import EmbeddingBatcher, batch_inputs
from gpubalance.gateway.cache import (
    MemoryCache,
    RedisCache,
    ResponseCache,
    cache_key,
    is_deterministic,
)
from gpubalance.gateway.config import GatewayConfig, load_gateway_config
from gpubalance.gateway.metrics import GatewayMetrics
from gpubalance.gateway.responses import send_bytes, send_error
from gpubalance.gateway.runtime import Backend, Runtime, build_runtime
from gpubalance.gateway.scrape import parse_vllm_metrics
from gpubalance.gateway.tokens import TokenEstimator
from gpubalance.gateway.upstream import CallResult, Upstream, open_fast_pool, open_session

__all__ = ["GatewayApp"]

_ENDPOINTS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
}


class _TooLarge(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> bytes:
    msg = await receive()
    body: bytes = msg.get("body", b"")
    if not msg.get("more_body", False):
        if len(body) > limit:
            raise _TooLarge
        return body
    parts = [body]
    size = len(body)
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            break
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        parts.append(chunk)
        if not msg.get("more_body", False):
            break
    return b"".join(parts)


def _bearer(value: bytes | None) -> bytes | None:
    if value is None:
        return None
    if value[:7].lower() == b"bearer ":
        return value[7:].strip()
    return value.strip()


def hash_key(key: str) -> str:
    """SHA-256 hex digest of an API key (what the config stores)."""
    return hashlib.sha256(key.encode()).hexdigest()


class GatewayApp:
    """ASGI callable. Construct with a validated config; nothing starts until lifespan
    startup (or :meth:`startup`) runs."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        config_path: str | Path | None = None,
        install_signal_handlers: bool = True,
    ) -> None:
        self.config = config
        self.config_path = None if config_path is None else Path(config_path)
        self.install_signal_handlers = install_signal_handlers
        self.runtime: Runtime | None = None
        self.metrics = GatewayMetrics(lambda: self.runtime)
        self.upstream = Upstream(config, self.metrics)
        self.estimator = TokenEstimator()
        self.cache: ResponseCache | None = None
        self.batcher: EmbeddingBatcher | None = None
        self.log: AccessLog | None = None
        self.reloads = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._hup_installed = False

    # ------------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        """Open connection pools, cache, log and background tasks."""
        cfg = self.config
        if cfg.tokenizer_path:
            self.estimator = TokenEstimator.from_file(cfg.tokenizer_path)
        rt = build_runtime(cfg)
        for b in rt.backends():
            b.session = open_session(b, cfg)
            b.fast = open_fast_pool(b, cfg)
        self.runtime = rt
        await self._open_cache(cfg)
        self.batcher = EmbeddingBatcher(
            self.upstream.call, cfg.batching, self.metrics.batch_inputs.observe
        )
        if cfg.access_log:
            self.log = AccessLog(cfg.access_log)
            self.log.open()
        self._tasks = [
            asyncio.create_task(self._health_loop()),
            asyncio.create_task(self._scrape_loop()),
            asyncio.create_task(self._log_loop()),
        ]
        if self.install_signal_handlers and self.config_path is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                asyncio.get_running_loop().add_signal_handler(
                    signal.SIGHUP, lambda: asyncio.ensure_future(self.reload())
                )
                self._hup_installed = True

    async def _open_cache(self, cfg: GatewayConfig) -> None:
        old = self.cache
        if not cfg.cache.enabled:
            self.cache = None
        else:
            c = cfg.cache
            redis = None
            if c.redis_url:
                redis = RedisCache(c.redis_url, c.namespace, c.ttl_s)
                await redis.connect()
            self.cache = ResponseCache(
                MemoryCache(c.ttl_s, c.max_entries, min(c.max_bytes, c.max_bytes)), redis
            )
        if old is not None and old.redis is not None:
            await old.redis.close()

    async def shutdown(self) -> None:
        """Stop tasks, flush the log, close pools and cache."""
        if self._hup_installed:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        if self.batcher is not None:
            await self.batcher.close()
        if self.runtime is not None:
            for b in self.runtime.backends():
                if b.fast is not None:
                    b.fast.close()
                if b.session is not None:
                    await b.session.close()
                    b.session = None
        if self.cache is not None and self.cache.redis is not None:
            await self.cache.redis.close()
        if self.log is not None:
            self.log.close()

    async def reload(self, config: GatewayConfig | None = None) -> bool:
        """Re-read the config file (or take ``config``) and swap the runtime; backends that
        keep pool, name and URL keep their state. A bad file leaves the old config."""
        if config is None:
            if self.config_path is None:
                return False
            try:
                config = load_gateway_config(self.config_path)
            except Exception as exc:
                self.metrics.error("reload")
                print(
                    f"gpubalance serve: reload failed, keeping old config: {exc}", file=sys.stderr
                )
                return False
        old = self.runtime
        try:
            rt = build_runtime(config, old)
            if config.tokenizer_path != self.config.tokenizer_path:
                self.estimator = (
                    TokenEstimator.from_file(config.tokenizer_path)
                    if config.tokenizer_path
                    else TokenEstimator()
                )
        except Exception as exc:  # e.g. a roofline name or tokenizer file that fails
            self.metrics.error("reload")
            print(f"gpubalance serve: reload failed, keeping old config: {exc}", file=sys.stderr)
            return False
        kept = {id(b) for b in rt.backends()}
        for b in rt.backends():
            if b.session is None:
                b.session = open_session(b, config)
                b.fast = open_fast_pool(b, config)
        self.config = config
        self.upstream.set_config(config)
        if self.batcher is not None:
            self.batcher.config = config.batching
        if config.cache != (old.config.cache if old else None):
            await self._open_cache(config)
        self.runtime = rt
        self.reloads += 1
        if old is not None:
            gone = [b for b in old.backends() if id(b) not in kept]
            if gone:
                asyncio.get_running_loop().create_task(self._close_later(gone))
        return True

    async def _close_later(self, gone: list[Backend]) -> None:
        while any(b.state.in_flight for b in gone):
            await asyncio.sleep(0.5)
        for b in gone:
            if b.fast is not None:
                b.fast.close()
            if b.session is not None:
                await b.session.close()

    # ------------------------------------------------------------------ background
    async def _probe(self, b: Backend, path: str, timeout_s: float) -> None:
        import aiohttp

        ok = False
        try:
            async with b.session.get(
                b.url + path, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as resp:
                await resp.read()
                ok = resp.status < 500
        except Exception:
            ok = False
        b.active_ok = ok
        if not ok and b.state.healthy:
            b.state.healthy = False
            b.ejected_until = time.monotonic()
            self.metrics.error("health_check")

    async def _health_loop(self) -> None:
        while True:
            h = self.config.health
            rt = self.runtime
            if rt is not None:
                bs = [b for b in rt.backends() if b.session is not None]
                if h.active:
                    await asyncio.gather(*(self._probe(b, h.path, h.timeout_s) for b in bs))
                now = time.monotonic()
                for b in bs:
                    b.maybe_readmit(now)
            await asyncio.sleep(h.interval_s)

    async def _scrape_one(self, b: Backend, path: str) -> None:
        import aiohttp

        try:
            async with b.session.get(b.url + path, timeout=aiohttp.ClientTimeout(total=2)) as r:
                if r.status != 200:
                    return
                text = await r.text()
        except Exception:
            self.metrics.error("scrape")
            return
        load = parse_vllm_metrics(text)
        b.state.waiting = load.waiting
        b.state.kv_usage = load.kv_usage

    async def _scrape_loop(self) -> None:
        while True:
            rt = self.runtime
            interval = 1.0
            if rt is not None:
                jobs: list[Any] = []
                for pool in rt.pools.values():
                    sc = pool.config.scrape
                    if sc.enabled:
                        interval = min(interval, sc.interval_s)
                        jobs.extend(
                            self._scrape_one(b, sc.path)
                            for b in pool.backends
                            if b.session is not None
                        )
                if jobs:
                    await asyncio.gather(*jobs)
            await asyncio.sleep(interval)

    async def _log_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.log_flush_s)
            if self.log is not None:
                self.log.flush()

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            endpoint = _ENDPOINTS.get(path)
            if endpoint is not None:
                if scope["method"] != "POST":
                    await send_error(
                        send, 405, "use POST", "invalid_request_error", "method_not_allowed"
                    )
                    return
                await self._proxy(scope, receive, send, endpoint, path)
            elif path == "/v1/models":
                await self._models(scope, send)
            elif path == "/health":
                await send_bytes(send, 200, b'{"status":"ok"}')
            elif path == "/metrics":
                await send_bytes(
                    send, 200, self.metrics.render(), content_type=b"text/plain; version=0.0.4"
                )
            elif path.startswith("/admin/"):
                await self._admin(scope, receive, send, path)
            else:
                await send_error(
                    send, 404, f"no route {path}", "invalid_request_error", "not_found"
                )
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await run_lifespan(receive, send, self.startup, self.shutdown)

    def _tenant(self, rt: Runtime, auth: bytes | None) -> tuple[str | None, str | None]:
        """(tenant, error message); with no keys configured everyone is tenant None."""
        if not rt.keys:
            return None, None
        key = _bearer(auth)
        if not key:
            return None, "missing API key (Authorization: Bearer <key>)"
        tenant = rt.keys.get(hashlib.sha256(key).hexdigest())
        if tenant is None:
            return None, "invalid API key"
        return tenant, None

    async def _models(self, scope: Scope, send: Send) -> None:
        rt = self.runtime
        assert rt is not None
        if rt.keys:
            auth = next((v for k, v in scope["headers"] if k == b"authorization"), None)
            _, err = self._tenant(rt, auth)
            if err is not None:
                await send_error(send, 401, err, "invalid_request_error", "invalid_api_key")
                return
        await send_bytes(send, 200, rt.models_body)

    async def _proxy(
        self, scope: Scope, receive: Receive, send: Send, endpoint: str, path: str
    ) -> None:
        t0 = time.perf_counter()
        rt = self.runtime
        assert rt is not None
        cfg = rt.config
        auth = clen = tmo = None
        want = rt.rules.header_names
        hdrs: dict[str, str] | None = None
        for k, v in scope["headers"]:
            if k == b"authorization":
                auth = v
            elif k == b"content-length":
                clen = v
            elif k == b"x-gpubalance-timeout-s":
                tmo = v
            elif want:
                name = k.decode("latin-1")
                if name in want:
                    if hdrs is None:
                        hdrs = {}
                    hdrs[name] = v.decode("latin-1")
        rec: dict[str, Any] = {
            "endpoint": endpoint,
            "model": None,
            "pool": None,
            "backend": None,
            "input_tokens": None,
        }
        status = 500
        res: CallResult | None = None
        try:
            tenant, err = self._tenant(rt, auth)
            if err is not None:
                status = 401
                self.metrics.error("auth")
                await send_error(send, 401, err, "invalid_request_error", "invalid_api_key")
                return
            limit = cfg.limits.max_body_bytes
            try:
                if clen is not None and int(clen) > limit:
                    raise _TooLarge
                raw = await _read_body(receive, limit)
            except _TooLarge:
                status = 413
                self.metrics.error("too_large")
                await send_error(
                    send,
                    413,
                    f"request body larger than {limit} bytes",
                    "invalid_request_error",
                    "request_too_large",
                )
                return
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                status = 400
                self.metrics.error("bad_request")
                await send_error(
                    send,
                    400,
                    f"malformed JSON body: {exc}",
                    "invalid_request_error",
                    "invalid_json",
                )
                return
            model = body.get("model") if isinstance(body, dict) else None
            if not isinstance(model, str) or not model:
                status = 400
                self.metrics.error("bad_request")
                await send_error(
                    send,
                    400,
                    "body must be a JSON object with a 'model' string",
                    "invalid_request_error",
                    "missing_model",
                )
                return
            rec["model"] = model
            if tenant is not None:
                rec["tenant"] = tenant
            n_in = self.estimator.input_tokens(endpoint, body)
            rec["input_tokens"] = n_in
            pool_name = rt.rules.select(model, n_in, hdrs, tenant) if rt.rules.rules else None
            if pool_name is None:
                pool_name = rt.model_pool.get(model) or cfg.default_pool
            if pool_name is None:
                status = 404
                self.metrics.error("unknown_model")
                await send_error(
                    send,
                    404,
                    f"model {model!r} is not served here; known: {sorted(rt.model_pool)}",
                    "invalid_request_error",
                    "model_not_found",
                )
                return
            pool = rt.pools[pool_name]
            rec["pool"] = pool_name
            if endpoint == "embeddings":
                n_out = 0
            else:
                mt = body.get("max_tokens") or body.get("max_completion_tokens")
                n_out = (
                    mt if isinstance(mt, int) and mt > 0 else pool.config.cost.default_max_tokens
                )
            cost_s = pool.cost_fn(n_in, n_out)  # admission caps
            route_s = pool.route_cost_fn(n_in, n_out)  # routing and per-backend in-flight cost
            stream = endpoint != "embeddings" and bool(body.get("stream"))
            timeout_s = None
            if tmo is not None:
                with contextlib.suppress(ValueError):
                    timeout_s = max(0.001, float(tmo))
            ckey = None
            cache = self.cache
            if cache is not None and not stream and is_deterministic(endpoint, body):
                ckey = cache_key(endpoint, body)
                hit = await cache.get(ckey)
                self.metrics.cache_lookup(endpoint, hit is not None)
                if hit is not None:
                    rec["cache"] = hit[1]
                    status = 200
                    await send_bytes(send, 200, hit[0], [(b"x-gpubalance-cache", b"hit")])
                    return
            retry_after = pool.admission.try_admit(cost_s)
            if retry_after is not None:
                status = 429
                self.metrics.error("admission")
                await send_error(
                    send,
                    429,
                    f"pool {pool_name!r} is at its admission cap; retry later",
                    "rate_limit_error",
                    "pool_busy",
                    headers=[(b"retry-after", str(int(retry_after)).encode())],
                )
                return
            try:
                if stream:
                    res = await self.upstream.stream(
                        pool, path, raw, route_s, send, timeout_s, receive
                    )
                elif (
                    endpoint == "embeddings"
                    and cfg.batching.enabled
                    and self.batcher is not None
                    and (inputs := batch_inputs(body)) is not None
                ):
                    res = await self.batcher.submit(pool, body, inputs, route_s)
                else:
                    res = await self.upstream.call(pool, path, raw, route_s, timeout_s)
            finally:
                pool.admission.release(cost_s)
            status = res.status
            rec["backend"] = res.backend
            if not res.streamed:
                extra = [(b"x-gpubalance-backend", res.backend.encode())]
                await send_bytes(send, status, res.body, extra, res.content_type)
                if (
                    ckey is not None
                    and status == 200
                    and cache is not None
                    and len(res.body) <= cfg.cache.max_entry_bytes
                ):
                    await cache.put(ckey, res.body)
        except Exception as exc:  # never lose a request silently
            self.metrics.error("internal")
            rec["error"] = f"internal: {type(exc).__name__}: {exc}"
            if status == 500 and (res is None or not res.streamed):
                with contextlib.suppress(Exception):
                    await send_error(
                        send, 500, "internal gateway error", "server_error", "internal"
                    )
            status = 500
        finally:
            dt = time.perf_counter() - t0
            backend = rec["backend"] or "-"
            ttft = None if res is None else res.ttft_s
            self.metrics.observe(endpoint, backend, status, dt, ttft)
            if self.log is not None:
                rec["ts"] = time.time()
                rec["status"] = status
                rec["latency_s"] = dt
                rec["ttft_s"] = ttft
                rec["output_tokens"] = None if res is None else res.output_tokens
                if res is not None and res.error and "error" not in rec:
                    rec["error"] = res.error
                self.log.write(rec)

    # ------------------------------------------------------------------ admin
    async def _admin(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        rt = self.runtime
        assert rt is not None
        if rt.admin_sha256 is None:
            await send_error(
                send,
                404,
                "admin endpoint disabled (no admin key configured)",
                "invalid_request_error",
                "not_found",
            )
            return
        auth = _bearer(next((v for k, v in scope["headers"] if k == b"authorization"), None))
        if not auth or hashlib.sha256(auth).hexdigest() != rt.admin_sha256:
            self.metrics.error("auth")
            await send_error(
                send, 401, "admin key required", "invalid_request_error", "invalid_admin_key"
            )
            return
        method = scope["method"]
        if path == "/admin/state" and method == "GET":
            await send_bytes(send, 200, orjson.dumps(self.state_snapshot()))
        elif path == "/admin/backend" and method == "POST":
            try:
                body = orjson.loads(await _read_body(receive, 65536))
                pool = rt.pools[body["pool"]]
                b = next(x for x in pool.backends if x.name == body["backend"])
            except (orjson.JSONDecodeError, KeyError, TypeError, StopIteration, _TooLarge):
                await send_error(
                    send,
                    400,
                    "body must be {pool, backend, [draining], [weight]} naming an existing backend",
                    "invalid_request_error",
                    "bad_admin_request",
                )
                return
            if "draining" in body:
                b.state.draining = bool(body["draining"])
            if "weight" in body:
                w = body["weight"]
                if not isinstance(w, int | float) or w < 0:
                    await send_error(
                        send,
                        400,
                        "weight must be a number >= 0",
                        "invalid_request_error",
                        "bad_weight",
                    )
                    return
                b.state.weight = float(w)
            await send_bytes(send, 200, orjson.dumps(self.state_snapshot()))
        elif path == "/admin/reload" and method == "POST":
            ok = await self.reload()
            await send_bytes(send, 200 if ok else 500, orjson.dumps({"reloaded": ok}))
        else:
            await send_error(
                send, 404, f"no admin route {method} {path}", "invalid_request_error", "not_found"
            )

    def state_snapshot(self) -> dict[str, Any]:
        """Pools and backends with their live routing state (JSON-ready)."""
        rt = self.runtime
        assert rt is not None
        return {
            "reloads": self.reloads,
            "pools": {
                p.name: {
                    "policy": p.config.policy,
                    "queued": p.admission.queued,
                    "in_flight_cost_s": p.admission.in_flight_cost_s,
                    "backends": [
                        {
                            "name": b.name,
                            "url": b.url,
                            "weight": b.state.weight,
                            "labels": b.state.labels,
                            "healthy": b.state.healthy,
                            "draining": b.state.draining,
                            "in_flight": b.state.in_flight,
                            "in_flight_cost_s": b.state.in_flight_cost_s,
                            "waiting": b.state.waiting,
                            "kv_usage": b.state.kv_usage,
                            "sent_total": b.sent_total,
                        }
                        for b in p.backends
                    ],
                }
                for p in rt.pools.values()
            },
        }
