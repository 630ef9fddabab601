"""``gpubalance diagnose DIR``: which rank is slow, in which phase, and why."""

from __future__ import annotations

from pathlib import Path

import typer


def diagnose(
    traces: list[Path] = typer.Argument(
        ...,
        help="Trace directory (or files): gpubalance tracer files (*.gpbt) and/or PyTorch "
        "profiler chrome traces (*.json, *.json.gz), one per rank.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the diagnosis as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Write an HTML report here."),
    rel_threshold: float = typer.Option(
        0.05, help="A rank straggles when its busy time exceeds the step median by this share."
    ),
) -> None:
    """Analyse per-rank traces: stragglers by rank and host, lost time by phase, fixes."""
    import orjson
    from rich.console import Console
    from rich.progress import Progress

    from gpubalance.diagnose.analyzer import AnalysisOptions, analyze
    from gpubalance.diagnose.load import find_trace_files, load_traces
    from gpubalance.errors import UserInputError
    from gpubalance.report.diagnose import (
        diagnosis_to_json,
        print_diagnosis,
        write_diagnosis_html,
    )

    if not 0 < rel_threshold < 10:
        raise UserInputError("must be in (0, 10)", field="rel-threshold")
    files = [f for p in traces for f in find_trace_files(p)]
    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=json_out or len(files) < 8) as prog:
        task = prog.add_task("reading traces", total=len(files))
        ts = load_traces(files, on_file=lambda _f: prog.advance(task))
    diag = analyze(ts, AnalysisOptions(rel_threshold=rel_threshold))
    if html is not None:
        write_diagnosis_html(diag, html)
    if json_out:
        doc = orjson.dumps(diagnosis_to_json(diag), option=orjson.OPT_SERIALIZE_NUMPY)
        typer.echo(doc.decode())
        return
    console = Console()
    print_diagnosis(console, diag)
    if html is not None:
        console.print(f"HTML report: {html}")
