"""``gpubalance loadtest URL``: load-test an OpenAI-compatible endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpubalance.errors import UserInputError


def _floats(text: str | None, name: str) -> tuple[float, ...]:
    if not text:
        return ()
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UserInputError(
            f"expected comma-separated numbers, got {text!r}", field=name
        ) from None


def _ints(text: str | None, name: str) -> tuple[int, ...]:
    vals = _floats(text, name)
    if any(v != int(v) or v < 1 for v in vals):
        raise UserInputError(f"expected positive integers, got {text!r}", field=name)
    return tuple(int(v) for v in vals)


def loadtest(
    url: Annotated[
        str,
        typer.Argument(
            help="Server URL: http://host:port, optionally with /v1 or a full OpenAI path."
        ),
    ],
    endpoint: Annotated[str, typer.Option(help="chat, completions or embeddings.")] = "chat",
    model: Annotated[
        str | None, typer.Option(help="Model name; default: first id at /v1/models.")
    ] = None,
    stream: Annotated[bool, typer.Option(help="Stream answers (SSE) and time tokens.")] = True,
    rate: Annotated[
        str | None, typer.Option(help="Offered rate(s) in req/s, comma list = sweep.")
    ] = None,
    concurrency: Annotated[
        str | None, typer.Option(help="Closed-loop concurrency level(s), comma list = sweep.")
    ] = None,
    shape: Annotated[str, typer.Option(help="Arrivals: constant, poisson or gamma.")] = "poisson",
    gamma_cv: Annotated[float, typer.Option(help="Gap CV for gamma arrivals (>1 bursty).")] = 2.0,
    trace: Annotated[
        Path | None, typer.Option(help="Replay this trace (Azure CSV or JSONL).")
    ] = None,
    time_scale: Annotated[float, typer.Option(help="Trace replay speed-up factor.")] = 1.0,
    trace_start: Annotated[float, typer.Option(help="Skip trace before this time (s).")] = 0.0,
    max_input_tokens: Annotated[
        int | None, typer.Option(help="Clip traced prompts to this many tokens.")
    ] = None,
    requests: Annotated[int | None, typer.Option(help="Requests per run.")] = None,
    duration: Annotated[float | None, typer.Option(help="Seconds per run.")] = None,
    input_tokens: Annotated[int, typer.Option(help="Prompt tokens per request.")] = 256,
    output_tokens: Annotated[int, typer.Option(help="Answer tokens per request.")] = 128,
    token_spread: Annotated[
        float, typer.Option(help="Uniform relative spread of token counts (0-1).")
    ] = 0.0,
    sla: Annotated[
        list[str] | None,
        typer.Option(help="Goodput bound, e.g. e2e:p95<=0.5 or ttft:p99<=200ms (repeat)."),
    ] = None,
    goodput: Annotated[bool, typer.Option(help="Search the highest rate meeting --sla.")] = False,
    goodput_start: Annotated[float, typer.Option(help="First goodput trial rate.")] = 1.0,
    goodput_trials: Annotated[int, typer.Option(help="Goodput trial budget.")] = 12,
    max_error_rate: Annotated[float, typer.Option(help="SLA: largest failed fraction.")] = 0.01,
    gpus: Annotated[int, typer.Option(help="GPUs behind the URL, for per-GPU figures.")] = 1,
    timeout: Annotated[float, typer.Option(help="Per-request timeout, seconds.")] = 60.0,
    max_connections: Annotated[int, typer.Option(help="Open-loop connection pool.")] = 1024,
    ignore_eos: Annotated[
        bool, typer.Option(help="Send ignore_eos/min_tokens (vLLM) for exact lengths.")
    ] = True,
    api_key: Annotated[
        str | None, typer.Option(envvar="OPENAI_API_KEY", help="Bearer token.", show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for arrivals and token counts.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write results with per-request records (JSON).")
    ] = None,
    csv: Annotated[Path | None, typer.Option(help="Write per-request records as CSV.")] = None,
    html: Annotated[Path | None, typer.Option(help="Write an HTML report.")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """Load-test an OpenAI-compatible endpoint: latency percentiles, throughput, errors.

    Open loop (--rate, --trace, --goodput) sends on schedule whatever the server does;
    closed loop (--concurrency) keeps N requests in flight. Server failures never stop the
    run: they are counted by kind and reported (exit code 1 when every request failed).
    """
    import orjson
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )

    from gpubalance.config import validate_model
    from gpubalance.loadtest import Endpoint, LoadTestConfig, endpoint_url, parse_sla
    from gpubalance.loadtest.client import fetch_model_id
    from gpubalance.loadtest.records import RequestRecord
    from gpubalance.loadtest.results import write_json_atomic
    from gpubalance.loadtest.runner import run_async
    from gpubalance.report.loadtest import (
        errors_table,
        goodput_text,
        runs_table,
        write_loadtest_csv,
        write_loadtest_html,
    )

    if endpoint not in ("chat", "completions", "embeddings"):
        raise UserInputError(
            f"unknown endpoint {endpoint!r}; known: chat, completions, embeddings",
            field="endpoint",
        )
    full_url = endpoint_url(url, endpoint)  # type: ignore[arg-type]
    err = Console(stderr=True)
    if model is None:
        found = run_async(fetch_model_id(full_url, timeout_s=min(timeout, 5.0)))
        if found is None and not quiet:
            err.print(f"[yellow]note:[/] no model list at {url}; sending model 'default'")
        model = found or "default"
    rates = _floats(rate, "rate")
    levels = _ints(concurrency, "concurrency")
    if goodput or sla:
        mode = "goodput"
    elif trace is not None:
        mode = "trace"
    elif levels:
        mode = "concurrency"
    else:
        mode = "rate"
    if mode == "goodput" and rates:
        goodput_start = rates[0]
    if mode in ("rate", "goodput") and requests is None and duration is None:
        duration = 10.0 if mode == "goodput" else 30.0
    if mode == "concurrency" and requests is None and duration is None:
        requests = 200
    config = validate_model(
        LoadTestConfig,
        {
            "endpoint": Endpoint(
                url=full_url,
                kind=endpoint,
                model=model,
                stream=stream,
                ignore_eos=ignore_eos,
                timeout_s=timeout,
                api_key=api_key,
            ),
            "mode": mode,
            "shape": shape,
            "gamma_cv": gamma_cv,
            "rates_rps": rates,
            "concurrencies": levels,
            "requests": requests,
            "duration_s": duration,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "token_spread": token_spread,
            "seed": seed,
            "trace": str(trace) if trace is not None else None,
            "time_scale": time_scale,
            "trace_start_s": trace_start,
            "max_input_tokens": max_input_tokens,
            "gpus": gpus,
            "max_connections": max_connections,
            "sla": parse_sla(sla or [], max_error_rate) if mode == "goodput" else None,
            "goodput_start_rps": goodput_start,
            "goodput_max_trials": goodput_trials,
        },
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
        transient=False,
    ) as progress:

        class Sink:
            task: TaskID | None = None
            failed = 0

            def start(self, label: str, total: int) -> None:
                self.task = progress.add_task(label, total=total or None, failed=0)
                self.failed = 0

            def done(self, record: RequestRecord) -> None:
                if self.task is None:
                    return
                if not record.ok:
                    self.failed += 1
                    progress.update(self.task, advance=1, failed=self.failed)
                else:
                    progress.advance(self.task)

        from gpubalance.loadtest import run_loadtest

        result = run_loadtest(config, Sink())

    if out is not None:
        write_json_atomic(out, result.to_dict(records=True))
    if csv is not None:
        write_loadtest_csv(result, csv)
    if html is not None:
        write_loadtest_html(result, html)
    if json_out:
        typer.echo(orjson.dumps(result.to_dict(records=False), option=orjson.OPT_INDENT_2))
    else:
        import sys

        # a pipe gets 80 columns by default, too narrow for the percentile table
        con = Console() if sys.stdout.isatty() else Console(width=200)
        con.print(runs_table(result))
        table = errors_table(result)
        if table is not None:
            con.print(table)
        text = goodput_text(result)
        if text:
            con.print(text)
    total = sum(r.summary.n_requests for r in result.runs)
    ok = sum(r.summary.n_ok for r in result.runs)
    if total and ok == 0:
        kinds = sorted({k for r in result.runs for k in r.summary.errors})
        err.print(
            f"[bold red]warning:[/] all {total} requests failed ({', '.join(kinds)}); "
            "see the failed-requests table"
        )
        raise typer.Exit(1)
