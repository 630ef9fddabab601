"""``gpubalance plan``: which GPUs, how many, in what nodes, at what cost and p99.

Thin: parse flags, validate them into a :class:`~gpubalance.plan.config.PlanRequest`, call
:func:`~gpubalance.plan.entry.run_plan` under a progress bar, render.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpubalance.errors import UserInputError

_SLA_HELP = "seconds; 0 removes the bound"


def _sla_value(value: float | None, name: str) -> float | None:
    if value is None or value == 0:
        return None
    if not value > 0:
        raise UserInputError(
            f"must be > 0 seconds (or 0 to remove the bound), got {value}", field=name
        )
    return value


def plan(
    model: Annotated[
        str, typer.Option(help="Model catalog name or a local HF config.json path.")
    ] = "llama-3.1-8b",
    precision: Annotated[
        str, typer.Option(help="Weight precision: bf16, fp16, fp8, int8, int4.")
    ] = "bf16",
    rate: Annotated[
        float | None,
        typer.Option(help="Today's arrival rate in req/s [default: 20, or the trace's rate]."),
    ] = None,
    trace: Annotated[
        Path | None, typer.Option(help="Plan for this trace (Azure CSV or JSONL) instead.")
    ] = None,
    time_scale: Annotated[float, typer.Option(help="Replay the trace this much faster.")] = 1.0,
    arrivals: Annotated[
        str, typer.Option(help="Generated arrivals: poisson, or profile (its burstiness).")
    ] = "poisson",
    requests: Annotated[int, typer.Option(help="Requests per simulation.")] = 4000,
    seed: Annotated[int, typer.Option(help="Seed of the workload and router.")] = 0,
    sla_ttft_p99: Annotated[float, typer.Option(help=f"p99 TTFT bound, {_SLA_HELP}.")] = 2.0,
    sla_e2e_p99: Annotated[float, typer.Option(help=f"p99 end-to-end bound, {_SLA_HELP}.")] = 20.0,
    sla_ttft_p95: Annotated[
        float | None, typer.Option(help=f"p95 TTFT bound, {_SLA_HELP}.")
    ] = None,
    sla_e2e_p95: Annotated[
        float | None, typer.Option(help=f"p95 end-to-end bound, {_SLA_HELP}.")
    ] = None,
    growth_monthly: Annotated[
        float, typer.Option(help="Monthly load growth as a fraction (0.05 = 5 %/month).")
    ] = 0.05,
    months: Annotated[int, typer.Option(help="Planning horizon in months.")] = 12,
    gpus: Annotated[
        str | None, typer.Option(help="Comma-separated GPU types [default: whole catalog].")
    ] = None,
    node_sizes: Annotated[str, typer.Option(help="GPUs-per-node options, comma list.")] = "1,2,4,8",
    price_file: Annotated[
        Path | None, typer.Option(help="YAML prices: gpu_hour_usd, node/storage/ops/network.")
    ] = None,
    catalog: Annotated[
        Path | None, typer.Option(help="GPU catalog YAML merged over the shipped one.")
    ] = None,
    models_file: Annotated[
        Path | None, typer.Option(help="Model catalog YAML merged over the shipped one.")
    ] = None,
    efficiency: Annotated[
        Path | None,
        typer.Option(
            help="Roofline efficiency profile from `gpubalance calibrate --model roofline`."
        ),
    ] = None,
    spare_node: Annotated[
        bool, typer.Option(help="Add a spare node so the SLA holds with one node down.")
    ] = True,
    prune: Annotated[
        bool, typer.Option(help="Skip shapes an analytic bound proves dearer than the best.")
    ] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML report.")] = None,
    top: Annotated[int, typer.Option(help="Candidates shown in the table.")] = 15,
) -> None:
    """Plan a GPU fleet: every GPU type x GPUs per node x tensor parallelism, sized by
    simulation to meet the SLA today and after growth, priced, with failure domains.

    With no arguments: Llama-3.1-8B at bf16, the embedded workload profile at 20 req/s
    (Poisson), p99 TTFT <= 2 s and p99 end-to-end <= 20 s, 5 %/month growth for 12 months,
    every catalog GPU, one spare node.
    """
    from rich.console import Console

    from gpubalance.config import validate_model
    from gpubalance.plan.config import PlanRequest
    from gpubalance.plan.sla import Sla

    sla = validate_model(
        Sla,
        {
            "ttft_p99_s": _sla_value(sla_ttft_p99, "sla_ttft_p99"),
            "e2e_p99_s": _sla_value(sla_e2e_p99, "sla_e2e_p99"),
            "ttft_p95_s": _sla_value(sla_ttft_p95, "sla_ttft_p95"),
            "e2e_p95_s": _sla_value(sla_e2e_p95, "sla_e2e_p95"),
        },
        source="--sla-*",
    )
    data: dict[str, Any] = {
        "model": model,
        "precision": precision,
        "rate_rps": rate,
        "trace": trace,
        "time_scale": time_scale,
        "arrivals": arrivals,
        "requests": requests,
        "seed": seed,
        "sla": sla,
        "growth_monthly": growth_monthly,
        "months": months,
        "gpus": _split(gpus) if gpus else None,
        "node_sizes": _ints(node_sizes, "node_sizes"),
        "price_file": price_file,
        "catalog": catalog,
        "models_file": models_file,
        "efficiency": efficiency,
        "spare_node": spare_node,
        "prune": prune,
    }
    req = validate_model(PlanRequest, data, source="options")
    if html is not None and not html.parent.exists():
        raise UserInputError("directory does not exist", file=html.parent, field="html")
    result = _run_with_progress(req, Console(stderr=True))
    if html is not None:
        from gpubalance.report.plan import write_plan_html

        write_plan_html(result, html)
    if json_out:
        import sys

        import orjson

        from gpubalance.report.plan import plan_to_dict

        sys.stdout.buffer.write(
            orjson.dumps(
                plan_to_dict(result), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
            )
            + b"\n"
        )
        sys.stdout.flush()
    else:
        from gpubalance.report.plan import render_plan

        render_plan(result, Console(), limit=top)
        if html is not None:
            Console().print(f"HTML report: {html}")


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _ints(text: str, name: str) -> list[int]:
    try:
        return [int(p) for p in _split(text)]
    except ValueError:
        raise UserInputError(
            f"expected comma-separated integers, got {text!r}", field=name
        ) from None


def _run_with_progress(req: Any, console: Any) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gpubalance.plan.entry import run_plan

    if not console.is_terminal:  # logs and pipes get no bar
        return run_plan(req)
    with Progress(
        TextColumn("searching"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def progress(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what)

        return run_plan(req, progress)
