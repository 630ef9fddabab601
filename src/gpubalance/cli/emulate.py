"""`gpubalance emulate`: an OpenAI-compatible server that behaves like a GPU server."""

from __future__ import annotations

from pathlib import Path

import typer


def emulate(
    gpu: str | None = typer.Option(None, help="GPU type from the catalog, e.g. H100."),
    model: str | None = typer.Option(None, help="Model from the catalog, e.g. llama-3.1-8b."),
    port: int = typer.Option(8000, help="Listen port."),
    host: str = typer.Option("127.0.0.1", help="Listen address."),
    precision: str = typer.Option("bf16", help="Weight precision."),
    tp: int = typer.Option(1, min=1, help="Tensor-parallel degree (GPUs per replica)."),
    max_num_seqs: int = typer.Option(256, min=1, help="Most sequences running at once."),
    max_batched_tokens: int = typer.Option(8192, min=1, help="Token budget per iteration."),
    kv_capacity_tokens: int | None = typer.Option(
        None, min=16, help="KV-cache capacity in tokens (default: memory estimate)."
    ),
    step_model: Path | None = typer.Option(
        None, help="LinearStepTime YAML to time iterations instead of the roofline model."
    ),
    served_model_name: str | None = typer.Option(
        None, help="Model name in /v1/models (default: --model)."
    ),
    default_max_tokens: int = typer.Option(256, min=1, help="Output tokens when none asked."),
    instant: bool = typer.Option(False, "--instant", help="Zero model time (overhead tests)."),
) -> None:
    """Serve /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models and a
    vLLM-style /metrics, timed by the simulator's replica model (continuous batching)."""
    import uvicorn

    from gpubalance.emulate.app import EmulatorApp
    from gpubalance.emulate.engine import Engine
    from gpubalance.emulate.spec import build_replica

    replica = None
    if not instant:
        replica = build_replica(
            gpu=gpu,
            model=model,
            precision=precision,
            tp=tp,
            max_num_seqs=max_num_seqs,
            max_batched_tokens=max_batched_tokens,
            kv_capacity_tokens=kv_capacity_tokens,
            step_model_path=step_model,
        )
    name = served_model_name or model or "emulated"
    app = EmulatorApp(Engine(replica), name, default_max_tokens=default_max_tokens)
    uvicorn.run(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        backlog=4096,
    )
