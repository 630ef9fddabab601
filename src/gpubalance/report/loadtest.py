"""Rendering of load-test results: Rich tables, per-request CSV, HTML (CDF, latency vs load)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from gpubalance.loadtest.results import LoadTestResult
    from gpubalance.loadtest.stats import RunSummary

__all__ = [
    "errors_table",
    "goodput_text",
    "runs_table",
    "write_loadtest_csv",
    "write_loadtest_html",
]

CSV_COLUMNS = (
    "run",
    "index",
    "scheduled_s",
    "sent_s",
    "end_s",
    "e2e_s",
    "ttft_s",
    "itl_mean_s",
    "n_chunks_gaps",
    "input_tokens",
    "output_tokens",
    "ok",
    "status",
    "error_kind",
    "error_detail",
)


def _ms(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x * 1e3:.1f}"


def _load(s: RunSummary) -> str:
    if s.concurrency is not None:
        return f"c={s.concurrency}"
    return f"{s.offered_rps:.4g}/s" if s.offered_rps is not None else "-"


def runs_table(result: LoadTestResult) -> Table:
    """One row per run: counts, throughput, latency percentiles in milliseconds."""
    from rich import box
    from rich.table import Table

    streaming = result.config.endpoint.streaming
    t = Table(
        title=f"load test: {result.config.endpoint.url} (latencies in ms)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    cols = ["run", "ok", "fail", "req/s"]
    if result.config.gpus > 1:
        cols.append("/GPU")
    cols += [
        "in tok/s" if result.config.endpoint.kind == "embeddings" else "tok/s",
        "e2e50",
        "e2e90",
        "e2e95",
        "e2e99",
    ]
    if streaming:
        cols += ["ttft50", "ttft99", "itl50", "itl99"]
    cols.append("late99")
    for col in cols:
        t.add_column(col, justify="left" if col == "run" else "right", no_wrap=True)
    for run in result.runs:
        s = run.summary
        e2e = s.latency_s["e2e"]
        row = [s.label, str(s.n_ok), str(s.n_failed), f"{s.throughput_rps:.1f}"]
        if result.config.gpus > 1:
            row.append(f"{s.throughput_rps / s.gpus:.1f}")
        emb = result.config.endpoint.kind == "embeddings"
        row.append(f"{s.input_tokens_per_s if emb else s.output_tokens_per_s:.0f}")
        row += [_ms(e2e.p50), _ms(e2e.p90), _ms(e2e.p95), _ms(e2e.p99)]
        if streaming:
            tt, it = s.latency_s["ttft"], s.latency_s["itl"]
            row += [_ms(tt.p50), _ms(tt.p99), _ms(it.p50), _ms(it.p99)]
        row.append(_ms(s.send_lateness_s.p99) if s.send_lateness_s else "-")
        t.add_row(*row)
    return t


def errors_table(result: LoadTestResult) -> Table | None:
    """Failed requests by run and kind with one example each (None when none failed)."""
    from rich.table import Table

    rows = [
        (run.summary.label, kind, count, run.summary.error_examples.get(kind, ""))
        for run in result.runs
        for kind, count in run.summary.errors.items()
    ]
    if not rows:
        return None
    t = Table(title="failed requests (left out of latency figures)", title_justify="left")
    for col in ("run", "kind", "count", "example"):
        t.add_column(col, overflow="fold")
    for label, kind, count, ex in rows:
        t.add_row(label, kind, str(count), ex)
    return t


def goodput_text(result: LoadTestResult) -> str:
    """One line on the goodput search outcome ('' when there was none)."""
    g = result.goodput
    if g is None or result.config.sla is None:
        return ""
    sla = ", ".join(str(t) for t in result.config.sla.targets)
    if g.best_rps is None:
        return f"goodput: no trial rate met the SLA ({sla}); lowest tried failed"
    per_gpu = g.best_rps / result.config.gpus
    upper = f", {g.first_fail_rps:.4g} req/s failed" if g.first_fail_rps else ", no failure seen"
    return (
        f"goodput: {g.best_rps:.4g} req/s ({per_gpu:.4g} per GPU) meets {sla}{upper} "
        f"({len(g.trials)} trials)"
    )


def write_loadtest_csv(result: LoadTestResult, path: str | Path) -> Path:
    """Per-request records of every run as CSV (temp file + rename)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for run in result.runs:
            for r in run.records:
                itl = sum(r.itl_s) / len(r.itl_s) if r.itl_s else math.nan
                w.writerow(
                    [
                        r.run,
                        r.index,
                        f"{r.scheduled_s:.6f}",
                        f"{r.sent_s:.6f}",
                        f"{r.end_s:.6f}",
                        f"{r.e2e_s:.6f}",
                        "" if math.isnan(r.ttft_s) else f"{r.ttft_s:.6f}",
                        "" if math.isnan(itl) else f"{itl:.6f}",
                        len(r.itl_s),
                        r.input_tokens,
                        r.output_tokens,
                        int(r.ok),
                        r.status,
                        r.error_kind,
                        r.error_detail,
                    ]
                )
    tmp.replace(p)
    return p


def write_loadtest_html(result: LoadTestResult, path: str | Path) -> Path:
    """HTML report: runs table, errors, latency CDF per run, latency vs load for sweeps."""
    import numpy as np

    from gpubalance.report.html import HtmlReport, new_figure

    ep = result.config.endpoint
    page = HtmlReport(f"Load test: {ep.url}")
    page.add_text(
        None,
        f"endpoint {ep.kind}, model {ep.model}, streaming {ep.streaming}, mode "
        f"{result.config.mode}, GPUs {result.config.gpus}. Latencies in milliseconds over "
        "successful requests; failed requests are counted below and left out.",
    )
    cols = ["run", "load", "ok", "failed", "req/s", "out tok/s", "e2e p50", "e2e p90"]
    cols += ["e2e p95", "e2e p99", "ttft p50", "ttft p99", "itl p50", "itl p99", "late p99"]
    rows = []
    for run in result.runs:
        s = run.summary
        e, tt, it = s.latency_s["e2e"], s.latency_s["ttft"], s.latency_s["itl"]
        late = s.send_lateness_s.p99 if s.send_lateness_s else math.nan
        rows.append(
            [s.label, _load(s), s.n_ok, s.n_failed, s.throughput_rps, s.output_tokens_per_s]
            + [v * 1e3 for v in (e.p50, e.p90, e.p95, e.p99, tt.p50, tt.p99, it.p50, it.p99)]
            + [late * 1e3]
        )
    page.add_table("Runs", cols, rows)
    err_rows = [
        [run.summary.label, k, n, run.summary.error_examples.get(k, "")]
        for run in result.runs
        for k, n in run.summary.errors.items()
    ]
    if err_rows:
        page.add_table("Failed requests", ["run", "kind", "count", "example"], err_rows)
    text = goodput_text(result)
    if text:
        page.add_text("Goodput", text)
    fig, ax = new_figure()
    for run in result.runs:
        lat = np.sort([r.e2e_s * 1e3 for r in run.records if r.ok])
        if lat.size:
            ax.plot(lat, np.arange(1, lat.size + 1) / lat.size, label=run.summary.label)
    ax.set_xlabel("end-to-end latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.grid(alpha=0.3)
    if result.runs:
        ax.legend(fontsize="small")
    page.add_figure("Latency CDF", fig)
    if len(result.runs) > 1:
        fig, ax = new_figure()
        xs = [
            float(r.summary.concurrency)
            if r.summary.concurrency is not None
            else r.summary.throughput_rps
            for r in result.runs
        ]
        order = np.argsort(xs)
        for stat in ("p50", "p95", "p99"):
            ys = [result.runs[i].summary.latency_s["e2e"].get(stat) * 1e3 for i in order]
            ax.plot([xs[i] for i in order], ys, marker="o", label=f"e2e {stat}")
        closed = result.runs[0].summary.concurrency is not None
        ax.set_xlabel("concurrency" if closed else "throughput (req/s)")
        ax.set_ylabel("latency (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        page.add_figure("Latency vs load", fig)
    return page.write(path)
