"""Per-request measurements for calibration, read from load-test results or access logs.

Accepted files (the kind is detected from the content):

* ``gpubalance loadtest --out`` results (JSON object, ``format: gpubalance-loadtest/1``):
  every successful record of every run, with its run label, send time, TTFT and e2e.
* JSON-lines access logs, one request per line, e.g. the gateway's (``gpubalance serve``
  with ``access_log``). Fields read: ``input_tokens`` and ``output_tokens`` (integers >= 0,
  required), the end-to-end latency in seconds as ``latency_s`` (or ``e2e_s`` or
  ``duration_s``; required), ``ttft_s`` (optional), ``ts`` (unix seconds when the line was
  written, i.e. at completion; optional, gives send time = ts - latency), ``status``
  (optional; lines with a status outside 200-299 are skipped), ``error`` (optional; lines
  with a non-empty error are skipped), ``cache`` (optional; lines with a non-empty value
  are cache hits that never reached a model and are skipped), ``backend`` (optional;
  becomes the run label so requests of different servers are not mixed up when overlaps
  are computed). A token count present as ``null`` (the server did not report it) skips
  the line; a missing one is an error.

Bad files raise :class:`~gpubalance.errors.UserInputError` naming file, line and field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gpubalance.errors import UserInputError

__all__ = [
    "Measurements",
    "isolated_mask",
    "load_measurements",
    "select_isolated",
]

_LATENCY_KEYS = ("latency_s", "e2e_s", "duration_s")


@dataclass(frozen=True, slots=True)
class Measurements:
    """Successful requests, one entry per request (arrays of equal length).

    ``sent_s``: send time in seconds on the source's clock (NaN when unknown);
    ``ttft_s``: NaN when unknown; ``run``: label of the run / server the request belongs
    to (send times are only comparable within one run); ``offered_rps``: the run's
    offered rate (NaN for closed loop or logs).
    """

    input_tokens: np.ndarray
    output_tokens: np.ndarray
    e2e_s: np.ndarray
    ttft_s: np.ndarray
    sent_s: np.ndarray
    run: np.ndarray
    offered_rps: np.ndarray
    sources: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.e2e_s.shape[0])

    def select(self, mask: np.ndarray) -> Measurements:
        """The requests where ``mask`` is true."""
        return Measurements(
            self.input_tokens[mask],
            self.output_tokens[mask],
            self.e2e_s[mask],
            self.ttft_s[mask],
            self.sent_s[mask],
            self.run[mask],
            self.offered_rps[mask],
            self.sources,
        )

    def runs(self) -> list[str]:
        """Run labels in first-seen order."""
        seen: dict[str, None] = {}
        for r in self.run.tolist():
            seen.setdefault(r, None)
        return list(seen)


def isolated_mask(m: Measurements) -> np.ndarray:
    """True for requests that had the server to themselves: no other request of the same
    run was in flight at any moment between their send and their end. False where the
    send time is unknown."""
    out = np.zeros(len(m), dtype=bool)
    end = m.sent_s + m.e2e_s
    for label in m.runs():
        idx = np.flatnonzero((m.run == label) & np.isfinite(m.sent_s))
        if idx.size == 0:
            continue
        order = idx[np.argsort(m.sent_s[idx], kind="stable")]
        s, e = m.sent_s[order], end[order]
        prev_end = np.maximum.accumulate(np.concatenate([[-math.inf], e[:-1]]))
        next_start = np.concatenate([s[1:], [math.inf]])
        out[order] = (prev_end <= s) & (e <= next_start)
    return out


def select_isolated(
    m: Measurements, min_isolated: int, *, otherwise: str
) -> tuple[Measurements, list[str]]:
    """The requests that ran alone (:func:`isolated_mask`) when there are at least
    ``min_isolated`` of them, else all of ``m``; with a note saying which, where
    ``otherwise`` tells what fitting on all requests does to the result."""
    mask = isolated_mask(m)
    n = int(mask.sum())
    if n >= min_isolated:
        return m.select(mask), [f"fitted on {n} requests that ran alone (no overlap)"]
    return m, [
        f"only {n} requests ran alone (< {min_isolated}); fitted on all {len(m)}: {otherwise}"
    ]


def _num(raw: Any, *, file: Path, line: int | None, field: str, integer: bool) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise UserInputError(f"expected a number, got {raw!r}", file=file, line=line, field=field)
    v = float(raw)
    if not math.isfinite(v) or v < 0 or (integer and v != int(v)):
        kind = "a non-negative integer" if integer else "a finite number >= 0"
        raise UserInputError(f"expected {kind}, got {raw!r}", file=file, line=line, field=field)
    return v


class _Rows:
    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {
            k: [] for k in ("inp", "out", "e2e", "ttft", "sent", "run", "rate")
        }

    def add(self, inp: float, out: float, e2e: float, ttft: float, sent: float, run: str,
            rate: float) -> None:  # fmt: skip
        for k, v in zip(self.cols, (inp, out, e2e, ttft, sent, run, rate), strict=True):
            self.cols[k].append(v)


def _from_results(doc: dict[str, Any], p: Path, rows: _Rows) -> None:
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise UserInputError("load-test results without 'runs'", file=p, field="runs")
    found_records = False
    for k, run in enumerate(runs):
        recs = run.get("records") if isinstance(run, dict) else None
        if recs is None:
            continue
        found_records = True
        label = f"{p.name}:{run.get('label') or k}"
        rate = run.get("offered_rps")
        rate_f = float(rate) if isinstance(rate, (int, float)) else math.nan
        for j, r in enumerate(recs):
            if not isinstance(r, dict) or not r.get("ok"):
                continue
            where = f"runs[{k}].records[{j}]"
            inp = _num(r.get("input_tokens"), file=p, line=None, field=f"{where}.input_tokens",
                       integer=True)  # fmt: skip
            out = _num(r.get("output_tokens"), file=p, line=None,
                       field=f"{where}.output_tokens", integer=True)  # fmt: skip
            e2e = _num(r.get("e2e_s"), file=p, line=None, field=f"{where}.e2e_s", integer=False)
            ttft_raw = r.get("ttft_s")
            ttft = math.nan if ttft_raw is None else float(ttft_raw)
            sent_raw = r.get("sent_s")
            sent = float(sent_raw) if isinstance(sent_raw, (int, float)) else math.nan
            rows.add(inp, out, e2e, ttft, sent, label, rate_f)
    if not found_records:
        raise UserInputError(
            "load-test results hold no per-request records; write them with "
            "`gpubalance loadtest ... --out FILE` (--json output has summaries only)",
            file=p,
        )


def _from_jsonl(text: bytes, p: Path, rows: _Rows) -> None:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UserInputError(f"not JSON: {exc}", file=p, line=n) from None
        if not isinstance(rec, dict):
            raise UserInputError("expected a JSON object per line", file=p, line=n)
        status = rec.get("status")
        if isinstance(status, int) and not 200 <= status < 300:
            continue
        if rec.get("error") or rec.get("cache"):
            continue
        if any(f in rec and rec[f] is None for f in ("input_tokens", "output_tokens")):
            continue  # a count the server did not report (e.g. a stream without usage)
        key = next((k for k in _LATENCY_KEYS if k in rec), None)
        if key is None:
            raise UserInputError(
                f"no latency field (one of {', '.join(_LATENCY_KEYS)})", file=p, line=n,
                field="latency_s",
            )  # fmt: skip
        for f in ("input_tokens", "output_tokens"):
            if rec.get(f) is None:
                raise UserInputError("missing token count", file=p, line=n, field=f)
        inp = _num(rec["input_tokens"], file=p, line=n, field="input_tokens", integer=True)
        out = _num(rec["output_tokens"], file=p, line=n, field="output_tokens", integer=True)
        e2e = _num(rec[key], file=p, line=n, field=key, integer=False)
        ttft_raw = rec.get("ttft_s")
        ttft = (
            _num(ttft_raw, file=p, line=n, field="ttft_s", integer=False)
            if ttft_raw is not None
            else math.nan
        )
        ts = rec.get("ts")
        sent = float(ts) - e2e if isinstance(ts, (int, float)) else math.nan
        rows.add(inp, out, e2e, ttft, sent, f"{p.name}:{rec.get('backend') or ''}", math.nan)


def load_measurements(paths: Sequence[str | Path]) -> Measurements:
    """Read and concatenate measurements from load-test results and JSONL access logs."""
    if not paths:
        raise UserInputError("give at least one results or access-log file")
    rows = _Rows()
    for path in paths:
        p = Path(path)
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            raise UserInputError("file not found", file=p) from None
        except OSError as exc:
            raise UserInputError(f"cannot read: {exc}", file=p) from None
        doc: Any = None
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and str(doc.get("format", "")).startswith("gpubalance-loadtest"):
            _from_results(doc, p, rows)
        elif isinstance(doc, dict) and "runs" in doc:
            raise UserInputError(f"unknown results format {doc.get('format')!r}", file=p)
        else:
            _from_jsonl(raw, p, rows)
    c = rows.cols
    if not c["e2e"]:
        raise UserInputError("no successful requests in " + ", ".join(str(p) for p in paths))
    return Measurements(
        np.asarray(c["inp"], dtype=np.int64),
        np.asarray(c["out"], dtype=np.int64),
        np.asarray(c["e2e"], dtype=np.float64),
        np.asarray(c["ttft"], dtype=np.float64),
        np.asarray(c["sent"], dtype=np.float64),
        np.asarray(c["run"], dtype=object),
        np.asarray(c["rate"], dtype=np.float64),
        tuple(str(p) for p in paths),
    )
