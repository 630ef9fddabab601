"""Read the tracer's per-rank files (:mod:`gpubalance.diagnose.format`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gpubalance.diagnose.format import (
    CAT_OTHER,
    KIND_COLL,
    KIND_GPU,
    KIND_NAME,
    KIND_PHASE,
    KIND_STEP,
    KIND_WORK,
    MAGIC,
    RECORD_DTYPE,
    RECORD_SIZE,
    decode_name,
)
from gpubalance.diagnose.model import RankTrace
from gpubalance.errors import UserInputError

__all__ = ["TracerFile", "rank_trace_from_records", "read_tracer_file", "read_tracer_rank"]

_REQUIRED = ("run_id", "rank", "world_size", "host", "start_unix_ns", "version")


@dataclass
class TracerFile:
    """The raw content of one tracer file."""

    path: Path
    header: dict[str, Any]
    records: np.ndarray  # RECORD_DTYPE, NAME records removed
    names: dict[int, tuple[str, int]]  # name_id -> (name, category)
    warnings: list[str] = field(default_factory=list)

    @property
    def next_step(self) -> int:
        steps = self.records["step"][self.records["kind"] == KIND_STEP]
        return int(steps.max()) + 1 if steps.size else 0


def read_tracer_file(path: str | Path) -> TracerFile:
    """Parse one file; UserInputError (naming the file) when it is not a readable trace.

    A file whose record area is cut short loses only its last partial record; that is
    reported in ``warnings``.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UserInputError(f"cannot read trace file: {exc.strerror}", file=p) from exc
    if len(data) < len(MAGIC) + 4 or not data.startswith(MAGIC):
        raise UserInputError("not a gpubalance trace file (bad magic bytes)", file=p)
    (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
    body_at = len(MAGIC) + 4
    if body_at + hlen > len(data):
        raise UserInputError("trace header is truncated", file=p)
    try:
        header = orjson.loads(data[body_at : body_at + hlen])
    except orjson.JSONDecodeError as exc:
        raise UserInputError(f"trace header is not valid JSON ({exc})", file=p) from exc
    if not isinstance(header, dict):
        raise UserInputError("trace header is not a JSON object", file=p)
    for key in _REQUIRED:
        if key not in header:
            raise UserInputError("trace header lacks this field", file=p, field=key)
    rec_bytes = data[body_at + hlen :]
    warnings: list[str] = []
    extra = len(rec_bytes) % RECORD_SIZE
    if extra:
        warnings.append(f"{p}: truncated: dropped a partial record of {extra} bytes at the end")
        rec_bytes = rec_bytes[: len(rec_bytes) - extra]
    recs = np.frombuffer(rec_bytes, dtype=RECORD_DTYPE)
    is_name = recs["kind"] == KIND_NAME
    names: dict[int, tuple[str, int]] = {}
    for rec in recs[is_name]:
        names[int(rec["name_id"])] = (decode_name(rec), int(rec["depth"]))
    recs = recs[~is_name]
    bad = (recs["kind"] > KIND_NAME) | (recs["dur_ns"] < 0) | (recs["step"] < 0)
    if bad.any():
        first = int(np.argmax(bad))
        warnings.append(
            f"{p}: corrupt: {int(bad.sum())} invalid record(s), first at record {first}; skipped"
        )
        recs = recs[~bad]
    return TracerFile(p, header, recs, names, warnings)


def read_tracer_rank(path: str | Path) -> RankTrace:
    """Read one tracer file into a :class:`RankTrace`."""
    tf = read_tracer_file(path)
    h = tf.header
    return rank_trace_from_records(
        tf.records,
        tf.names,
        rank=int(h["rank"]),
        host=str(h["host"]),
        run_id=str(h["run_id"]),
        world_size=int(h["world_size"]),
        start_unix_s=int(h["start_unix_ns"]) / 1e9,
        source=str(tf.path),
        warnings=tf.warnings,
    )


def rank_trace_from_records(
    recs: np.ndarray,
    names: dict[int, tuple[str, int]],
    *,
    rank: int,
    host: str,
    run_id: str,
    world_size: int,
    start_unix_s: float,
    source: str,
    warnings: list[str] | None = None,
) -> RankTrace:
    """Aggregate raw records into per-step arrays (vectorised; no Python loop per record)."""
    warnings = list(warnings or [])
    kind = recs["kind"]
    step_recs = recs[kind == KIND_STEP]
    # a resumed file may repeat a step: keep the last record of each step
    order = np.argsort(step_recs["step"], kind="stable")
    srt = step_recs[order]
    if srt.size:
        last = np.r_[srt["step"][1:] != srt["step"][:-1], True]
        srt = srt[last]
    steps = srt["step"].astype(np.int64)
    n = steps.size
    wall = srt["dur_ns"] / 1e9
    start = start_unix_s + srt["start_ns"] / 1e9

    cat_lut = np.full(65536, CAT_OTHER, dtype=np.int64)
    for nid, (_name, cat) in names.items():
        cat_lut[nid] = cat

    def index_of(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = sel["step"].astype(np.int64)
        idx = np.searchsorted(steps, s)
        idx_c = np.minimum(idx, max(n - 1, 0))
        ok = (idx < n) & (steps[idx_c] == s) if n else np.zeros(s.size, dtype=bool)
        return idx_c[ok], np.flatnonzero(ok)

    is_phase = (kind == KIND_PHASE) | (kind == KIND_COLL)
    top = recs[is_phase & (recs["depth"] <= 1)]
    idx, ok = index_of(top)
    top = top[ok]
    cats = cat_lut[top["name_id"]]
    dur = top["dur_ns"] / 1e9
    cat_s = np.bincount(idx * 4 + cats, weights=dur, minlength=n * 4).reshape(n, 4)
    pre = top["depth"] == 0  # recorded outside step(): belongs to the next step
    wall = wall + np.bincount(idx[pre], weights=dur[pre], minlength=n)
    start = start - np.bincount(idx[pre], weights=dur[pre], minlength=n)
    cat_s[:, CAT_OTHER] += np.maximum(wall - cat_s.sum(axis=1), 0.0)

    work_recs = recs[kind == KIND_WORK]
    widx, wok = index_of(work_recs)
    work = np.full(n, np.nan)
    if widx.size:
        sums = np.bincount(widx, weights=work_recs["value"][wok], minlength=n)
        has = np.bincount(widx, minlength=n) > 0
        work[has] = sums[has]

    gpu_recs = recs[kind == KIND_GPU]
    gidx, gok = index_of(gpu_recs)
    gpu = np.full(n, np.nan)
    if gidx.size:
        sums = np.bincount(gidx, weights=gpu_recs["dur_ns"][gok] / 1e9, minlength=n)
        has = np.bincount(gidx, minlength=n) > 0
        gpu[has] = sums[has]

    coll = recs[kind == KIND_COLL]
    collectives: dict[str, float] = {}
    if coll.size:
        ids, inv = np.unique(coll["name_id"], return_inverse=True)
        tot = np.bincount(inv, weights=coll["dur_ns"] / 1e9)
        for nid, t in zip(ids, tot, strict=True):
            collectives[names.get(int(nid), (f"#{int(nid)}", 2))[0]] = float(t)
    if n == 0:
        warnings.append(f"{source}: no complete step recorded")
    return RankTrace(
        rank=rank,
        host=host,
        run_id=run_id,
        world_size=world_size,
        source=source,
        steps=steps,
        start_s=start,
        wall_s=wall,
        cat_s=cat_s,
        work=work,
        gpu_s=gpu,
        collectives=collectives,
        warnings=warnings,
    )
