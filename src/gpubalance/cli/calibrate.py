"""``gpubalance calibrate RESULTS...``: fit a cost/performance profile to measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpubalance.errors import UserInputError


def calibrate(
    results: Annotated[
        list[Path], typer.Argument(help="loadtest --out results and/or JSON-lines access logs.")
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="token (TokenCostModel), roofline (RooflineEfficiency; needs --gpu, --llm) "
            "or step (LinearStepTime by replaying runs through the simulator).",
        ),
    ] = "token",
    gpu: Annotated[str | None, typer.Option(help="GPU catalog name (roofline).")] = None,
    llm: Annotated[str | None, typer.Option(help="Model catalog name (roofline).")] = None,
    precision: Annotated[str, typer.Option(help="Weight precision (roofline).")] = "bf16",
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree (roofline).")] = 1,
    max_batch: Annotated[int, typer.Option(help="Server's most requests per batch (step).")] = 32,
    max_batch_tokens: Annotated[
        int, typer.Option(help="Server's token budget per batch (step).")
    ] = 8192,
    chunked_prefill: Annotated[
        bool, typer.Option(help="Server splits prompts across iterations (step; LLMs).")
    ] = False,
    all_requests: Annotated[
        bool, typer.Option(help="Fit on all requests, not only those that ran alone.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write the profile here (YAML for .yaml/.yml).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Fit the token cost model, the roofline efficiencies or a batch-time model to
    load-test results or gateway access logs; report R² and MAPE; write a profile.

    The profile loads where gpubalance takes one: a token profile in ``partition
    --cost-profile`` and the gateway's cost config, a roofline efficiency profile in
    ``plan``, a step profile in ``emulate``.
    """
    import orjson
    from rich.console import Console

    from gpubalance.calibrate import (
        BatchLimits,
        fit_roofline,
        fit_step,
        fit_token,
        load_measurements,
    )
    from gpubalance.report.calibrate import calibration_renderables

    meas = load_measurements(results)
    if model == "token":
        cal = fit_token(meas, isolated_only=not all_requests)
    elif model == "roofline":
        if not gpu or not llm:
            raise UserInputError("--model roofline needs --gpu and --llm", field="gpu")
        cal = fit_roofline(
            meas, gpu=gpu, model=llm, precision=precision, tp=tp, isolated_only=not all_requests
        )
    elif model == "step":
        limits = BatchLimits(
            max_num_seqs=max_batch,
            max_batched_tokens=max_batch_tokens,
            chunked_prefill=chunked_prefill,
        )
        cal = fit_step(meas, limits)
    else:
        raise UserInputError(
            f"unknown model {model!r}; known: token, roofline, step", field="model"
        )
    if out is not None:
        cal.save_profile(out)
    if json_out:
        doc = cal.to_dict()
        doc["profile_path"] = str(out) if out is not None else None
        typer.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        return
    con = Console()
    for r in calibration_renderables(cal):
        con.print(r)
    if out is not None:
        con.print(f"profile written to {out}")
