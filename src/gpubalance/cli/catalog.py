"""``gpubalance catalog``: list GPUs and models; show whether a model fits in memory."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from gpubalance.errors import UserInputError


class What(StrEnum):
    """What to show."""

    all = "all"
    gpus = "gpus"
    models = "models"
    fit = "fit"


def catalog(
    what: Annotated[
        What,
        typer.Argument(help="gpus, models, fit (memory of --model per GPU x tp) or all."),
    ] = What.all,
    model: Annotated[
        str | None,
        typer.Option(help="Model name/alias or a local config.json (for 'fit')."),
    ] = None,
    gpu: Annotated[
        list[str] | None, typer.Option(help="GPU name/alias (repeat); default: every GPU.")
    ] = None,
    precision: Annotated[str, typer.Option(help="bf16, fp16, fp8, int8 or int4.")] = "bf16",
    tp: Annotated[
        list[int] | None, typer.Option(help="Tensor-parallel degree (repeat); default 1,2,4,8.")
    ] = None,
    kv_dtype: Annotated[str, typer.Option(help="KV-cache dtype: auto (16-bit) or fp8.")] = "auto",
    context: Annotated[
        int | None,
        typer.Option(help="Tokens one sequence must fit (max_model_len); default <= 8192."),
    ] = None,
    gpu_memory_utilization: Annotated[
        float, typer.Option(help="Fraction of GPU memory the engine may use.")
    ] = 0.9,
    gpus_file: Annotated[
        Path | None, typer.Option(help="Your GPU catalog YAML, merged over the shipped one.")
    ] = None,
    models_file: Annotated[
        Path | None, typer.Option(help="Your model catalog YAML, merged over the shipped one.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """List the GPU and model catalogs, or show the memory arithmetic of a model per GPU.

    With one --gpu and one --tp, 'fit' prints the whole memory arithmetic.
    """
    import orjson
    from rich.console import Console

    from gpubalance.hardware import load_gpu_catalog, load_model_catalog, resolve_model
    from gpubalance.hardware.memory import memory_fit_grid
    from gpubalance.report.catalog import (
        estimate_to_dict,
        fit_table,
        gpu_table,
        gpu_to_dict,
        model_table,
        model_to_dict,
        price_sources,
    )

    if not 0 < gpu_memory_utilization <= 1:
        raise UserInputError("must lie in (0, 1]", field="gpu_memory_utilization")
    if context is not None and context < 1:
        raise UserInputError("must be >= 1", field="context")
    for t in tp or []:
        if t < 1:
            raise UserInputError(f"must be >= 1, got {t}", field="tp")
    gpus_cat = load_gpu_catalog(gpus_file)
    gpu_specs = [gpus_cat.get(g) for g in gpu] if gpu else gpus_cat.specs()
    if what is What.all and model is not None:
        what = What.fit
    console = Console()
    out: dict[str, object] = {}

    if what in (What.all, What.gpus):
        out["gpus"] = [gpu_to_dict(g) for g in gpu_specs]
        if not json_out:
            console.print(gpu_table(gpu_specs))
            for line in price_sources(gpu_specs):
                console.print(f"  {line}", highlight=False, markup=False)
    if what in (What.all, What.models):
        models = load_model_catalog(models_file).specs()
        out["models"] = [model_to_dict(m) for m in models]
        if not json_out:
            console.print(model_table(models))
    if what is What.fit:
        if model is None:
            raise UserInputError("'fit' needs --model", field="model")
        spec = resolve_model(model, models_file)
        tps = tuple(tp) if tp else (1, 2, 4, 8)
        estimates = memory_fit_grid(
            spec,
            gpu_specs,
            precision,
            tps,
            kv_dtype=kv_dtype,
            context_tokens=context,
            gpu_memory_utilization=gpu_memory_utilization,
        )
        if not estimates:
            raise UserInputError(
                f"no GPU takes tp={','.join(map(str, tps))} in one node", field="tp"
            )
        out["model"] = model_to_dict(spec)
        out["estimates"] = [estimate_to_dict(e) for e in estimates]
        out["fits_anywhere"] = any(e.fits for e in estimates)
        if not json_out:
            if len(estimates) == 1:
                console.print(
                    estimates[0].breakdown(), highlight=False, markup=False, soft_wrap=True
                )
            else:
                console.print(fit_table(estimates))
                if not any(e.fits for e in estimates):
                    best = max(estimates, key=lambda e: e.kv_budget_bytes_per_gpu)
                    console.print("Fits nowhere; closest:", style="bold red")
                    console.print(best.breakdown(), highlight=False, markup=False, soft_wrap=True)
    if json_out:
        typer.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
