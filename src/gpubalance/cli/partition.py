"""``gpubalance partition [TRACE]``: compare count, LPT and Karmarkar–Karp on a workload.

Default cost model (no ``--cost-profile``): :data:`DEFAULT_COST`, a TokenCostModel with
quadratic prefill, roughly a 7-8B model on one A100/H100-class GPU at small batch:
5 ms per request, 50 µs per input token (20k tokens/s prefill), 5 ns per input token
squared (attention: +0.5 s at 10k tokens), 10 ms per output token. Balancing depends only
on the ratios between items, so the absolute scale does not change which policy wins.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from gpubalance.errors import UserInputError

__all__ = ["DEFAULT_COST_COEFFICIENTS", "parse_budget", "partition"]

DEFAULT_COST_COEFFICIENTS = {
    "overhead_s": 0.005,
    "prefill_s_per_token": 5e-5,
    "prefill_s_per_token2": 5e-9,
    "decode_s_per_token": 0.01,
}

_BUDGET = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|sec|tok|tokens|t)?\s*$")


def parse_budget(text: str) -> tuple[float | None, float | None]:
    """``'2.5'``/``'2.5s'`` -> (2.5 s, None); ``'16384tok'`` -> (None, 16384 tokens)."""
    m = _BUDGET.match(text)
    if not m:
        raise UserInputError(
            f"expected seconds (e.g. 2.5 or 2.5s) or tokens (e.g. 16384tok), got {text!r}",
            field="batch-budget",
        )
    value = float(m.group(1))
    if value <= 0:
        raise UserInputError(f"budget must be > 0, got {text!r}", field="batch-budget")
    if m.group(2) in ("tok", "tokens", "t"):
        return None, value
    return value, None


def partition(
    trace: Annotated[
        Path | None,
        typer.Argument(help="Trace (Azure CSV or JSONL); default: embedded workload."),
    ] = None,
    ranks: Annotated[int, typer.Option("--ranks", "-k", help="Number of ranks.")] = 8,
    policy: Annotated[
        str, typer.Option(help="count, lpt, kk or all (comma list allowed).")
    ] = "all",
    batch_budget: Annotated[
        str | None,
        typer.Option(help="Micro-batch budget: seconds (2.5 or 2.5s) or tokens (16384tok)."),
    ] = None,
    global_batch: Annotated[
        int | None, typer.Option(help="Items per step across ranks (default 32 x ranks).")
    ] = None,
    equal_counts: Annotated[
        bool, typer.Option(help="Global partition: same item count on every rank.")
    ] = False,
    cost_profile: Annotated[
        Path | None, typer.Option(help="TokenCostModel YAML/JSON (default: built-in).")
    ] = None,
    requests: Annotated[
        int, typer.Option(help="Requests in the embedded workload (without TRACE).")
    ] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed for the workload and the plans.")] = 0,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print JSON (one entry per policy).")
    ] = False,
    html: Annotated[Path | None, typer.Option(help="Also write an HTML report here.")] = None,
) -> None:
    """Split a workload across ranks by cost and compare with count-based round robin."""
    import orjson
    from rich.console import Console

    from gpubalance.balance.compare import ComparisonConfig, compare_policies
    from gpubalance.config import validate_model
    from gpubalance.cost import TokenCostModel
    from gpubalance.report.partition import partition_html, partition_json, partition_table
    from gpubalance.workload import default_workload, load_trace, to_arrays

    names = ["count", "lpt", "kk"] if policy.strip().lower() == "all" else policy.split(",")
    budget_s, budget_tokens = (None, None) if batch_budget is None else parse_budget(batch_budget)
    cfg = validate_model(
        ComparisonConfig,
        {
            "ranks": ranks,
            "policies": tuple(n.strip() for n in names if n.strip()),
            "global_batch": global_batch,
            "equal_counts": equal_counts,
            "budget_s": budget_s,
            "budget_tokens": budget_tokens,
            "seed": seed,
        },
        source="options",
    )
    model = (
        TokenCostModel.load(cost_profile)
        if cost_profile is not None
        else TokenCostModel(**DEFAULT_COST_COEFFICIENTS)
    )
    if trace is not None:
        reqs = load_trace(trace)
        title = f"partition of {trace.name} ({len(reqs):,} requests) into {ranks} ranks"
    else:
        if requests < 1:
            raise UserInputError(f"requests must be >= 1, got {requests}", field="requests")
        reqs = default_workload(requests, seed=seed)
        title = f"partition of the default workload ({len(reqs):,} requests) into {ranks} ranks"
    arrays = to_arrays(reqs)
    costs = model.costs_s(arrays.input_tokens, arrays.output_tokens)
    tokens = arrays.input_tokens + arrays.output_tokens
    constraint = cfg.constraint()
    if constraint is not None:
        try:
            constraint.check_items_fit(costs, tokens, item_names=[r.id for r in reqs])
        except UserInputError as exc:
            raise UserInputError(exc.message, file=trace, field="batch-budget") from None
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True, disable=json_out) as progress:
        task = progress.add_task("balancing", total=len(cfg.policies))
        results = compare_policies(costs, tokens, cfg, on_done=lambda _p: progress.advance(task))
    if html is not None:
        partition_html(results, title=title, path=html)
    if json_out:
        typer.echo(orjson.dumps(partition_json(results), option=orjson.OPT_INDENT_2).decode())
        return
    console = Console()
    console.width = max(console.width, 120)  # wide table; piped output defaults to 80
    console.print(partition_table(results, title=title))
