"""``gpubalance collectives``: all-reduce/all-gather/reduce-scatter/broadcast bandwidth."""

from __future__ import annotations

from typing import Any

import typer


def collectives(
    nproc: int = typer.Option(
        2, "--nproc", help="Local ranks to launch (ignored under torchrun, which sets them)."
    ),
    sizes: str = typer.Option("1K,64K,1M,4M", help="Message sizes (bytes; K/M/G suffixes)."),
    ops: str = typer.Option(
        "all_reduce,all_gather,reduce_scatter,broadcast", help="Collectives to run."
    ),
    iters: int = typer.Option(20, help="Timed runs per op and size."),
    warmup: int = typer.Option(5, help="Untimed runs first."),
    backend: str = typer.Option("auto", help="auto (nccl with CUDA, else gloo), nccl, gloo."),
    p2p: bool = typer.Option(True, help="Also measure the point-to-point bandwidth matrix."),
    delay_rank: int = typer.Option(-1, help="Inject: this rank sleeps before every op."),
    delay_ms: float = typer.Option(0.0, help="Inject: how long (ms)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Benchmark all-reduce/all-gather/reduce-scatter/broadcast (nccl-tests algbw/busbw).

    Per rank and per group (world, intra-node, inter-node). Launches --nproc local ranks,
    or runs as a worker when started by torchrun.
    """
    from gpubalance.diagnose.audit_run import in_distributed_launch
    from gpubalance.diagnose.bandwidth import parse_size
    from gpubalance.diagnose.collbench import BenchConfig
    from gpubalance.errors import UserInputError

    if backend not in ("auto", "nccl", "gloo"):
        raise UserInputError("use auto, nccl or gloo", field="backend")
    cfg = BenchConfig(
        sizes_bytes=tuple(parse_size(s) for s in sizes.split(",") if s.strip()),
        ops=tuple(o.strip() for o in ops.split(",") if o.strip()),
        iters=iters,
        warmup=warmup,
        p2p=p2p,
        delay_rank=delay_rank,
        delay_s=delay_ms / 1e3,
    )
    if in_distributed_launch():
        doc = _worker(cfg, backend)
        if doc is not None:
            _emit(doc, json_out)
        return
    if nproc < 1:
        raise UserInputError("need at least 1 rank (2 or more to measure bandwidth)", field="nproc")
    from gpubalance.diagnose.launch import launch_local

    args = ["collectives", "--json", "--sizes", sizes, "--ops", ops, "--iters", str(iters),
            "--warmup", str(warmup), "--backend", backend, "--delay-rank", str(delay_rank),
            "--delay-ms", str(delay_ms), "--p2p" if p2p else "--no-p2p"]  # fmt: skip
    res = launch_local("gpubalance.cli.main", args, nproc, timeout_s=600)
    import orjson

    try:
        doc = orjson.loads(res[0].stdout.strip().splitlines()[-1])
    except (IndexError, orjson.JSONDecodeError) as exc:
        tail = "; ".join(f"rank {r.rank}: {r.stderr.strip()[-300:]}" for r in res if r.stderr)
        raise UserInputError(f"collective workers failed: {tail}") from exc
    _emit(doc, json_out)


def _worker(cfg: Any, backend: str) -> dict[str, Any] | None:
    import os

    import torch
    import torch.distributed as dist

    from gpubalance.diagnose.collbench import run_collectives
    from gpubalance.diagnose.tracer import default_host

    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    try:
        res = run_collectives(cfg, default_host())
    finally:
        dist.destroy_process_group()
    return None if res is None else res.to_dict()


def _emit(doc: dict[str, Any], json_out: bool) -> None:
    import orjson
    from rich.console import Console

    from gpubalance.diagnose.collbench import BenchResult, CollRow
    from gpubalance.report.collectives import print_collectives

    if json_out:
        typer.echo(orjson.dumps(doc).decode())
        return
    res = BenchResult(**{**doc, "rows": [CollRow(**r) for r in doc["rows"]]})
    print_collectives(Console(), res)
