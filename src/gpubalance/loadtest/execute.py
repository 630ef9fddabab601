"""Run a :class:`LoadTestConfig`: its rate sweep, concurrency sweep, trace replay or goodput
search, one run after another on one process and one event loop per run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gpubalance.loadtest.config import LoadTestConfig
from gpubalance.loadtest.goodput import search_goodput
from gpubalance.loadtest.records import RequestRecord, RequestSpec
from gpubalance.loadtest.results import LoadTestResult, RunResult
from gpubalance.loadtest.runner import run_async, run_closed_loop, run_open_loop
from gpubalance.loadtest.schedule import TokenSpec, open_loop_schedule, token_counts, trace_schedule
from gpubalance.loadtest.stats import RunSummary, summarize

__all__ = ["ProgressSink", "run_loadtest"]


class ProgressSink(Protocol):
    """Receives progress: a run starts with ``total`` requests; each request finishes."""

    def start(self, label: str, total: int) -> None: ...  # pragma: no cover

    def done(self, record: RequestRecord) -> None: ...  # pragma: no cover


class _Null:
    def start(self, label: str, total: int) -> None:
        pass

    def done(self, record: RequestRecord) -> None:
        pass


def _tokens(config: LoadTestConfig) -> TokenSpec:
    return TokenSpec(config.input_tokens, config.output_tokens, config.token_spread)


def _open_run(
    config: LoadTestConfig, specs: list[RequestSpec], label: str, rate: float, sink: ProgressSink
) -> RunResult:
    sink.start(label, len(specs))
    records = run_async(
        run_open_loop(
            config.endpoint,
            specs,
            max_connections=config.max_connections,
            on_done=sink.done,
            label=label,
        )
    )
    summary = summarize(records, label=label, offered_rps=rate, gpus=config.gpus)
    return RunResult(summary, records)


def _rate_run(config: LoadTestConfig, rate: float, sink: ProgressSink, label: str) -> RunResult:
    specs = open_loop_schedule(
        config.shape,
        rate,
        config.n_for_rate(rate),
        _tokens(config),
        cv=config.gamma_cv,
        seed=config.seed,
    )
    return _open_run(config, specs, label, rate, sink)


def _concurrency_run(config: LoadTestConfig, c: int, sink: ProgressSink) -> RunResult:
    n = config.requests if config.requests is not None else 10**9
    label = f"concurrency={c}"
    inp, out = token_counts(_tokens(config), min(n, 10**6), seed=config.seed)
    specs = (RequestSpec(i, 0.0, int(inp[i % inp.size]), int(out[i % out.size])) for i in range(n))
    total = n if config.requests is not None else 0
    sink.start(label, total)
    records = run_async(
        run_closed_loop(
            config.endpoint,
            specs,
            c,
            duration_s=config.duration_s,
            on_done=sink.done,
            label=label,
        )
    )
    summary = summarize(records, label=label, concurrency=c, gpus=config.gpus)
    return RunResult(summary, records)


def run_loadtest(
    config: LoadTestConfig,
    sink: ProgressSink | None = None,
    on_trial: Callable[[float, RunSummary, list[str]], None] | None = None,
) -> LoadTestResult:
    """Run everything ``config`` asks for and return the results (never raises on server
    misbehaviour: failures are in the records and summaries)."""
    sink = sink or _Null()
    result = LoadTestResult(config)
    if config.mode == "rate":
        for rate in config.rates_rps:
            result.runs.append(_rate_run(config, rate, sink, f"rate={rate:g}"))
    elif config.mode == "concurrency":
        for c in config.concurrencies:
            result.runs.append(_concurrency_run(config, c, sink))
    elif config.mode == "trace":
        assert config.trace is not None
        specs = trace_schedule(
            config.trace,
            time_scale=config.time_scale,
            limit=config.requests,
            start_s=config.trace_start_s,
            max_input_tokens=config.max_input_tokens,
        )
        if config.duration_s is not None:
            specs = [s for s in specs if s.scheduled_s < config.duration_s] or specs[:1]
        span = specs[-1].scheduled_s
        rate = (len(specs) - 1) / span if span > 0 else float(len(specs))
        result.runs.append(_open_run(config, specs, f"trace x{config.time_scale:g}", rate, sink))
    else:
        assert config.sla is not None

        def trial(rate: float) -> RunSummary:
            run = _rate_run(config, rate, sink, f"goodput trial {rate:.4g} req/s")
            result.runs.append(run)
            return run.summary

        result.goodput = search_goodput(
            trial,
            config.sla,
            start_rps=config.goodput_start_rps,
            rel_tol=config.goodput_rel_tol,
            max_trials=config.goodput_max_trials,
            on_trial=on_trial,
        )
    return result
