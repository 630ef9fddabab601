"""Load a directory of per-rank traces (tracer files and/or profiler traces) into a TraceSet.

Bad files do not stop the analysis of the others: each problem is recorded in
``TraceSet.problems`` with the file's name. Only when no file is usable does loading raise
:class:`~gpubalance.errors.UserInputError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from functools import reduce
from pathlib import Path

import numpy as np

from gpubalance.diagnose.kineto import read_kineto_rank
from gpubalance.diagnose.model import RankTrace, TraceSet
from gpubalance.diagnose.reader import read_tracer_rank
from gpubalance.errors import UserInputError

__all__ = ["align_ranks", "find_trace_files", "load_traces"]

_TRACER_SUFFIX = ".gpbt"
_KINETO_SUFFIXES = (".json", ".json.gz")


def find_trace_files(path: str | Path) -> list[Path]:
    """Trace files under ``path`` (a directory, or one file): ``*.gpbt`` and ``*.json[.gz]``."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise UserInputError("no such trace directory or file", file=p)
    files = [
        f
        for f in sorted(p.iterdir())
        if f.is_file() and (f.name.endswith(_TRACER_SUFFIX) or f.name.endswith(_KINETO_SUFFIXES))
    ]
    if not files:
        raise UserInputError("no trace files (*.gpbt, *.json, *.json.gz) in directory", file=p)
    return files


def read_rank_file(path: Path) -> RankTrace:
    """Read one file with the reader its name calls for."""
    if path.name.endswith(_TRACER_SUFFIX):
        return read_tracer_rank(path)
    return read_kineto_rank(path)


def load_traces(
    paths: str | Path | Sequence[str | Path],
    *,
    on_file: Callable[[Path], None] | None = None,
) -> TraceSet:
    """Read every file and align the readable ranks of one run.

    Files from a different run than the majority, duplicate ranks and unreadable files are
    left out and named in ``problems``; ranks named by the header's world size but without a
    file are listed as missing.
    """
    roots = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    files = [f for p in roots for f in find_trace_files(p)]
    problems: list[str] = []
    traces: list[RankTrace] = []
    for f in files:
        if on_file is not None:
            on_file(f)
        try:
            rt = read_rank_file(f)
        except UserInputError as exc:
            problems.append(f"{exc}; file skipped")
            continue
        problems.extend(rt.warnings)
        if rt.steps.size == 0:
            continue
        traces.append(rt)
    if not traces:
        detail = "; ".join(problems[:5])
        raise UserInputError(f"no usable trace file among {len(files)} file(s): {detail}")
    ts = align_ranks(traces, problems)
    dirs = sorted({f.parent for f in files})
    ts.nvml = read_nvml_summaries(dirs, ts.problems)
    return ts


_NVML_FIELDS = ("util_gpu_pct", "sm_clock_mhz", "power_w", "temperature_c", "mem_used_bytes")


def read_nvml_summaries(dirs: Sequence[Path], problems: list[str]) -> dict[int, dict[str, float]]:
    """Mean telemetry per rank from ``nvml-rank*.jsonl`` files beside the traces.

    Unreadable lines are skipped and reported (file:line) in ``problems``.
    """
    import orjson

    sums: dict[int, dict[str, float]] = {}
    counts: dict[int, int] = {}
    for d in dirs:
        for f in sorted(d.glob("nvml-rank*.jsonl")):
            bad = 0
            first_bad = 0
            with open(f, "rb") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        rec = orjson.loads(line)
                        rank = int(rec["rank"])
                        vals = {k: float(rec[k]) for k in _NVML_FIELDS}
                    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                        bad += 1
                        first_bad = first_bad or lineno
                        continue
                    acc = sums.setdefault(rank, dict.fromkeys(_NVML_FIELDS, 0.0))
                    for k, v in vals.items():
                        acc[k] += v
                    counts[rank] = counts.get(rank, 0) + 1
            if bad:
                problems.append(f"{f}:{first_bad}: {bad} unreadable telemetry line(s) skipped")
    return {
        r: {k: v / counts[r] for k, v in acc.items()} | {"samples": float(counts[r])}
        for r, acc in sums.items()
    }


def align_ranks(traces: list[RankTrace], problems: list[str] | None = None) -> TraceSet:
    """Keep the majority run, one file per rank, and the steps all kept ranks recorded."""
    problems = list(problems or [])
    runs = Counter(t.run_id for t in traces)
    run_id, _ = runs.most_common(1)[0]
    kept: dict[int, RankTrace] = {}
    for t in traces:
        if t.run_id != run_id:
            problems.append(
                f"{t.source}: belongs to run {t.run_id!r}, not {run_id!r} (the run of most "
                "files); file skipped"
            )
            continue
        if t.rank in kept:
            problems.append(
                f"{t.source}: rank {t.rank} already read from {kept[t.rank].source}; file skipped"
            )
            continue
        kept[t.rank] = t
    ranks = sorted(kept)
    world = max((kept[r].world_size for r in ranks), default=0)
    missing = sorted(set(range(world)) - set(ranks))
    if missing:
        problems.append(
            f"missing rank(s) {_ranges(missing)} of world size {world}: no readable file; "
            "analysing the ranks present"
        )
    rows = [kept[r] for r in ranks]
    common = reduce(np.intersect1d, [t.steps for t in rows])
    longest = max(t.steps.size for t in rows)
    if common.size < longest:
        short = [t.rank for t in rows if t.steps.size < longest]
        problems.append(
            f"ranks recorded different steps (fewest: rank(s) {_ranges(short)}); "
            f"analysing the {common.size} step(s) all ranks recorded"
        )
    if common.size == 0:
        raise UserInputError("the readable ranks have no step in common; nothing to compare")

    def pick(t: RankTrace, arr: np.ndarray) -> np.ndarray:
        return arr[np.searchsorted(t.steps, common)]

    return TraceSet(
        run_id=run_id,
        ranks=np.array(ranks, dtype=np.int64),
        hosts=[t.host for t in rows],
        steps=common,
        start_s=np.stack([pick(t, t.start_s) for t in rows]),
        wall_s=np.stack([pick(t, t.wall_s) for t in rows]),
        cat_s=np.stack([pick(t, t.cat_s) for t in rows]),
        work=np.stack([pick(t, t.work) for t in rows]),
        gpu_s=np.stack([pick(t, t.gpu_s) for t in rows]),
        world_size=world,
        sources=[t.source for t in rows],
        collectives=[t.collectives for t in rows],
        problems=problems,
    )


def _ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``'0-2, 5'``."""
    out: list[str] = []
    start = prev = None
    for v in values:
        if start is None:
            start = prev = v
        elif prev is not None and v == prev + 1:
            prev = v
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = v
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)
