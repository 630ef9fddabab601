"""OpenAI-compatible ASGI server that behaves like one GPU server (see :mod:`.engine`).

Endpoints: ``POST /v1/chat/completions``, ``/v1/completions`` (streaming or not; exactly
``max_tokens`` tokens are generated, as with vLLM's ``ignore_eos``), ``/v1/embeddings``
(a prefill-only request; deterministic unit vectors), ``GET /v1/models``, ``/health`` and
a vLLM-style ``/metrics`` (``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
``vllm:gpu_cache_usage_perc``, ``vllm:kv_cache_usage_perc``, token counters and latency
histograms, all labelled ``model_name``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import struct
import time
from collections.abc import Iterator
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gpubalance.asgi import Receive, Scope, Send, run_lifespan
from gpubalance.emulate.engine import EmulatedRequest, Engine
from gpubalance.gateway.responses import send_bytes, send_error
from gpubalance.gateway.tokens import TokenEstimator
from gpubalance.sim.replica import RequestTooLarge

__all__ = ["EmulatorApp"]

_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class _Gauges(Collector):
    def __init__(self, engine: Engine, model: str) -> None:
        self.engine = engine
        self.model = model

    def collect(self) -> Iterator[GaugeMetricFamily]:
        e = self.engine
        for name, doc, v in (
            ("vllm:num_requests_running", "Requests running on the GPU.", e.num_running),
            ("vllm:num_requests_waiting", "Requests waiting to be scheduled.", e.num_waiting),
            ("vllm:gpu_cache_usage_perc", "KV-cache usage (1 = 100%).", e.kv_usage),
            ("vllm:kv_cache_usage_perc", "KV-cache usage (1 = 100%).", e.kv_usage),
        ):
            g = GaugeMetricFamily(name, doc, labels=["model_name"])
            g.add_metric([self.model], float(v))
            yield g


def _embedding(text: str, dim: int) -> list[float]:
    """Deterministic unit vector of ``dim`` floats from the text's SHA-256."""
    raw = b""
    counter = 0
    while len(raw) < 4 * dim:
        raw += hashlib.sha256(counter.to_bytes(4, "little") + text.encode()).digest()
        counter += 1
    vals = [x / 2**31 - 1.0 for x in struct.unpack(f"<{dim}I", raw[: 4 * dim])]
    norm = math.sqrt(sum(v * v for v in vals)) or 1.0
    return [v / norm for v in vals]


class EmulatorApp:
    """ASGI app around an :class:`Engine`. ``model`` is the served model name."""

    def __init__(
        self,
        engine: Engine,
        model: str,
        *,
        default_max_tokens: int = 256,
        embedding_dim: int = 16,
    ) -> None:
        self.engine = engine
        self.model = model
        self.default_max_tokens = default_max_tokens
        self.embedding_dim = embedding_dim
        self.estimator = TokenEstimator()
        self._ids = itertools.count(1)
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.registry.register(_Gauges(engine, model))
        lbl = ["model_name"]
        self._ttft = Histogram(
            "vllm:time_to_first_token_seconds", "TTFT.", lbl, buckets=_BUCKETS, registry=r
        ).labels(model)
        self._e2e = Histogram(
            "vllm:e2e_request_latency_seconds", "E2E latency.", lbl, buckets=_BUCKETS, registry=r
        ).labels(model)
        self._ok = Counter("vllm:request_success", "Finished requests.", lbl, registry=r).labels(
            model
        )
        self._prompt = Counter("vllm:prompt_tokens", "Prefill tokens.", lbl, registry=r).labels(
            model
        )
        self._gen = Counter("vllm:generation_tokens", "Generated tokens.", lbl, registry=r).labels(
            model
        )
        self._models = orjson.dumps(
            {
                "object": "list",
                "data": [
                    {"id": model, "object": "model", "created": 0, "owned_by": "gpubalance-emulate"}
                ],
            }
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send, self.engine.start, self.engine.stop)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/v1/chat/completions":
            await self._generate(receive, send, "chat")
        elif path == "/v1/completions":
            await self._generate(receive, send, "completions")
        elif path == "/v1/embeddings":
            await self._embeddings(receive, send)
        elif path == "/v1/models":
            await send_bytes(send, 200, self._models)
        elif path in ("/health", "/ping"):
            await send_bytes(send, 200, b"{}")
        elif path == "/metrics":
            await send_bytes(
                send, 200, generate_latest(self.registry), content_type=b"text/plain; version=0.0.4"
            )
        else:
            await send_error(send, 404, f"no route {path}", "invalid_request_error", "not_found")

    async def _body(self, receive: Receive, send: Send) -> dict[str, Any] | None:
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body", False):
                break
        try:
            body = orjson.loads(b"".join(chunks))
        except orjson.JSONDecodeError:
            await send_error(send, 400, "malformed JSON body", "invalid_request_error")
            return None
        if not isinstance(body, dict):
            await send_error(send, 400, "body must be a JSON object", "invalid_request_error")
            return None
        return body

    def _submit(self, n_in: int, n_out: int, stream: bool) -> EmulatedRequest:
        return self.engine.submit(n_in, n_out, stream)

    def _observe(self, req: EmulatedRequest) -> None:
        self._ok.inc()
        self._prompt.inc(req.input_tokens)
        self._gen.inc(req.tokens)
        if req.first_token_s >= 0:
            self._ttft.observe(req.first_token_s - req.start_s)
        self._e2e.observe(req.finish_s - req.start_s)

    async def _generate(self, receive: Receive, send: Send, endpoint: str) -> None:
        body = await self._body(receive, send)
        if body is None:
            return
        n_in = max(1, self.estimator.input_tokens(endpoint, body))
        mt = body.get("max_tokens") or body.get("max_completion_tokens")
        n_out = mt if isinstance(mt, int) and mt > 0 else self.default_max_tokens
        stream = bool(body.get("stream"))
        try:
            req = self._submit(n_in, n_out, stream)
        except RequestTooLarge as exc:
            await send_error(
                send, 400, str(exc), "invalid_request_error", "context_length_exceeded"
            )
            return
        rid = f"{'chatcmpl' if endpoint == 'chat' else 'cmpl'}-{next(self._ids)}"
        created = int(time.time())
        model = body.get("model") or self.model
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        if not stream:
            await req.done
            self._observe(req)
            text = "hi " * req.tokens
            if endpoint == "chat":
                msg = {"role": "assistant", "content": text}
                choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "message": msg}
                obj = "chat.completion"
            else:
                choice = {"index": 0, "text": text, "finish_reason": "length", "logprobs": None}
                obj = "text_completion"
            out = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": usage,
            }
            await send_bytes(send, 200, orjson.dumps(out))
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        chat = endpoint == "chat"
        obj = "chat.completion.chunk" if chat else "text_completion"
        head = {"id": rid, "object": obj, "created": created, "model": model}

        def chunk(n: int, finish: str | None) -> bytes:
            if chat:
                ch: dict[str, Any] = {
                    "index": 0,
                    "delta": {"content": "hi " * n},
                    "finish_reason": finish,
                }
            else:
                ch = {"index": 0, "text": "hi " * n, "finish_reason": finish}
            return b"data: " + orjson.dumps({**head, "choices": [ch]}) + b"\n\n"

        assert req.events is not None
        while True:
            n = await req.events.get()
            if n is None:
                break
            while not req.events.empty():  # tokens that arrived together go out together
                more = req.events.get_nowait()
                if more is None:
                    req.events.put_nowait(None)
                    break
                n += more
            await send({"type": "http.response.body", "body": chunk(n, None), "more_body": True})
        tail = chunk(0, "length")
        opts = body.get("stream_options")
        if isinstance(opts, dict) and opts.get("include_usage"):
            tail += b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n"
        tail += b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        self._observe(req)

    async def _embeddings(self, receive: Receive, send: Send) -> None:
        body = await self._body(receive, send)
        if body is None:
            return
        inp = body.get("input")
        texts = [inp] if isinstance(inp, str) else inp
        if not isinstance(texts, list) or not texts:
            await send_error(
                send, 400, "'input' must be a string or a list", "invalid_request_error"
            )
            return
        texts = [t if isinstance(t, str) else orjson.dumps(t).decode() for t in texts]
        counts = [max(1, self.estimator.count_text(t)) for t in texts]
        n_in = sum(counts)
        try:  # one prefill-only sequence per input, as vLLM schedules them
            reqs = [self._submit(n, 0, False) for n in counts]
        except RequestTooLarge as exc:
            await send_error(
                send, 400, str(exc), "invalid_request_error", "context_length_exceeded"
            )
            return
        for req in reqs:
            await req.done
            self._observe(req)
        dim = body.get("dimensions") if isinstance(body.get("dimensions"), int) else None
        dim = dim or self.embedding_dim
        data = [
            {"object": "embedding", "index": i, "embedding": _embedding(t, dim)}
            for i, t in enumerate(texts)
        ]
        out = {
            "object": "list",
            "data": data,
            "model": body.get("model") or self.model,
            "usage": {"prompt_tokens": n_in, "total_tokens": n_in},
        }
        await send_bytes(send, 200, orjson.dumps(out))
