"""Read PyTorch profiler (Kineto) chrome-trace JSON files, one per rank.

Steps come from the ``ProfilerStep#N`` annotations. Within each step window:

- *sync* is the union of the intervals of collective events: host ops such as
  ``nccl:all_reduce``, ``gloo:all_reduce``, ``c10d::allreduce_``, ``record_param_comms`` and
  GPU kernels named ``ncclKernel*`` / ``ncclDevKernel*`` (clipped to the step window);
- *data* is the union of DataLoader events (``enumerate(DataLoader)...``,
  ``...DataLoaderIter.__next__``) minus any overlap with sync;
- *compute* is the rest of the step (the profiler does not tell untraced host time apart).

Rank and world size come from ``distributedInfo``, else from a ``rank<N>`` in the file
name. Time in the file is microseconds; here it is converted to seconds.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gpubalance.diagnose.format import CAT_COMPUTE, CAT_DATA, CAT_SYNC
from gpubalance.diagnose.model import RankTrace
from gpubalance.errors import UserInputError

__all__ = ["is_collective_name", "read_kineto_rank"]

_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_RANK_RE = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_COLL_RE = re.compile(
    r"^(nccl:|gloo:|c10d::|ncclKernel|ncclDevKernel|record_param_comms)"
    r"|all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all",
    re.IGNORECASE,
)
_DATA_RE = re.compile(r"DataLoader", re.IGNORECASE)


def is_collective_name(name: str) -> bool:
    """True for profiler event names of collectives (host ops or NCCL kernels)."""
    return bool(_COLL_RE.search(name))


def _load_json(path: Path) -> Any:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise UserInputError(f"cannot read profiler trace ({exc})", file=path) from exc
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UserInputError(
            f"profiler trace is not valid JSON (truncated or corrupt?): {exc}", file=path
        ) from exc


def _union_len(intervals: list[tuple[float, float]]) -> tuple[float, list[tuple[float, float]]]:
    """Total length of a union of intervals, and the merged intervals."""
    if not intervals:
        return 0.0, []
    intervals.sort()
    merged: list[tuple[float, float]] = []
    cs, ce = intervals[0]
    for s, e in intervals[1:]:
        if s <= ce:
            ce = max(ce, e)
        else:
            merged.append((cs, ce))
            cs, ce = s, e
    merged.append((cs, ce))
    return sum(e - s for s, e in merged), merged


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    i = j = 0
    tot = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            tot += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


def read_kineto_rank(path: str | Path) -> RankTrace:
    """Read one profiler trace into a :class:`RankTrace` (UserInputError if unusable)."""
    p = Path(path)
    doc = _load_json(p)
    if isinstance(doc, list):
        events, meta = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events, meta = doc["traceEvents"], doc
    else:
        raise UserInputError("not a chrome-trace file (no 'traceEvents' list)", file=p)
    dist = meta.get("distributedInfo") or {}
    rank = dist.get("rank")
    if rank is None:
        m = _RANK_RE.search(p.name)
        if m is None:
            raise UserInputError(
                "cannot tell the rank: no distributedInfo.rank and no 'rank<N>' in the name",
                file=p,
            )
        rank = int(m.group(1))
    world = int(dist.get("world_size") or 0)
    host = str(meta.get("host_name") or meta.get("hostname") or f"host?{p.parent.name}")
    base_s = float(meta.get("baseTimeNanoseconds", 0)) / 1e9

    steps: list[tuple[int, float, float]] = []
    coll: list[tuple[float, float]] = []
    data: list[tuple[float, float]] = []
    coll_tot: dict[str, float] = {}
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        name = ev.get("name")
        ts, dur = ev.get("ts"), ev.get("dur")
        if not isinstance(name, str) or ts is None or dur is None:
            continue
        try:
            t0, d = float(ts), float(dur)
        except (TypeError, ValueError):
            continue
        m = _STEP_RE.match(name)
        if m:
            steps.append((int(m.group(1)), t0, t0 + d))
        elif is_collective_name(name):
            coll.append((t0, t0 + d))
            if name.startswith(("nccl:", "gloo:")):
                coll_tot[name] = coll_tot.get(name, 0.0) + d / 1e6
        elif _DATA_RE.search(name):
            data.append((t0, t0 + d))
    if not steps:
        raise UserInputError("no ProfilerStep#N events: profile with a schedule/step()", file=p)
    steps.sort()
    coll.sort()
    data.sort()
    n = len(steps)
    cat_s = np.zeros((n, 4))
    coll_starts = np.array([c[0] for c in coll])
    data_starts = np.array([c[0] for c in data])
    for i, (_sid, s0, s1) in enumerate(steps):
        c_iv = _clip(coll, coll_starts, s0, s1)
        d_iv = _clip(data, data_starts, s0, s1)
        c_len, c_m = _union_len(c_iv)
        d_len, d_m = _union_len(d_iv)
        d_len -= _overlap(c_m, d_m)
        cat_s[i, CAT_SYNC] = c_len / 1e6
        cat_s[i, CAT_DATA] = d_len / 1e6
        cat_s[i, CAT_COMPUTE] = max((s1 - s0) - c_len - d_len, 0.0) / 1e6
    arr = np.array([(s[0], s[1], s[2]) for s in steps])
    wall = (arr[:, 2] - arr[:, 1]) / 1e6
    return RankTrace(
        rank=int(rank),
        host=host,
        run_id=f"kineto-world{world}",
        world_size=world,
        source=str(p),
        steps=arr[:, 0].astype(np.int64),
        start_s=base_s + arr[:, 1] / 1e6,
        wall_s=wall,
        cat_s=cat_s,
        work=np.full(n, np.nan),
        gpu_s=np.full(n, np.nan),
        collectives=coll_tot,
    )


def _clip(
    ivs: list[tuple[float, float]], starts: np.ndarray, s0: float, s1: float
) -> list[tuple[float, float]]:
    """Intervals overlapping [s0, s1], clipped to it (``ivs`` sorted by start)."""
    if not ivs:
        return []
    hi = int(np.searchsorted(starts, s1, side="left"))
    out = []
    # an interval starting before s0 may still overlap: scan back over a bounded window
    for s, e in ivs[max(0, int(np.searchsorted(starts, s0)) - 64) : hi]:
        if e > s0 and s < s1:
            out.append((max(s, s0), min(e, s1)))
    return out
