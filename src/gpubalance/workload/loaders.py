"""Trace loaders: the Azure LLM inference trace CSV format and JSONL.

Azure format (Azure Public Dataset, "Azure LLM inference trace 2023/2024"): a header row
with ``TIMESTAMP,ContextTokens,GeneratedTokens``; TIMESTAMP is a date-time
(``2023-11-16 18:17:03.9799600``) or a number of seconds. Arrival times are returned in
seconds relative to the earliest request, so every trace starts at 0.

JSONL format: one object per line with ``input_tokens`` and ``output_tokens`` (ints >= 0)
and ``arrival_s`` (seconds, >= 0; optional, default 0); ``id`` (string) and ``tags``
(object of strings) are optional.

Every problem raises :class:`~gpubalance.errors.UserInputError` naming file, line and
field; nothing is returned half-read.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from gpubalance.errors import UserInputError
from gpubalance.workload.request import Request

__all__ = ["AZURE_COLUMNS", "load_azure_csv", "load_jsonl", "load_trace"]

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _token_count(raw: Any, *, file: Path, line: int, field: str) -> int:
    """Parse a token count: a non-negative integer (``12`` or ``12.0``)."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise UserInputError(f"not a number: {raw!r}", file=file, line=line, field=field) from None
    if isinstance(raw, bool) or value != value or value < 0 or value != int(value):
        raise UserInputError(
            f"token count must be a non-negative integer, got {raw!r}",
            file=file,
            line=line,
            field=field,
        )
    return int(value)


def _timestamp_s(raw: str, *, file: Path, line: int) -> float:
    """Seconds since the epoch (date-time) or the number itself (numeric column)."""
    text = raw.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UserInputError(
            f"not a date-time or number: {raw!r}", file=file, line=line, field="TIMESTAMP"
        ) from None


def load_azure_csv(path: str | Path) -> list[Request]:
    """Load an Azure-format CSV trace; requests sorted by arrival, ids ``"<row index>"``."""
    p = Path(path)
    try:
        handle = p.open(newline="", encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError("trace file not found", file=p) from None
    except OSError as exc:
        raise UserInputError(f"cannot read trace: {exc}", file=p) from None
    rows: list[tuple[float, int, int]] = []
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise UserInputError("trace is empty (no header row)", file=p, line=1) from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise UserInputError(f"not a CSV file: {exc}", file=p, line=1) from None
        names = [h.strip().lstrip("\ufeff") for h in header]
        index: dict[str, int] = {}
        for col in AZURE_COLUMNS:
            if col not in names:
                raise UserInputError(
                    f"missing column {col!r}; expected {', '.join(AZURE_COLUMNS)}, found "
                    f"{', '.join(names) or 'nothing'}",
                    file=p,
                    line=1,
                    field=col,
                )
            index[col] = names.index(col)
        width = max(index.values()) + 1
        try:
            for row in reader:
                line = reader.line_num
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) < width:
                    raise UserInputError(
                        f"row has {len(row)} fields, expected {len(names)}", file=p, line=line
                    )
                ts = _timestamp_s(row[index["TIMESTAMP"]], file=p, line=line)
                inp = _token_count(
                    row[index["ContextTokens"]], file=p, line=line, field="ContextTokens"
                )
                out = _token_count(
                    row[index["GeneratedTokens"]], file=p, line=line, field="GeneratedTokens"
                )
                rows.append((ts, inp, out))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise UserInputError(f"malformed CSV: {exc}", file=p, line=reader.line_num) from None
    if not rows:
        raise UserInputError("trace has a header but no requests", file=p)
    start = min(r[0] for r in rows)
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])
    return [Request(str(i), rows[i][0] - start, rows[i][1], rows[i][2]) for i in order]


def load_jsonl(path: str | Path) -> list[Request]:
    """Load a JSONL trace; requests sorted by arrival (stable), ids default to line numbers."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UserInputError("trace file not found", file=p) from None
    except OSError as exc:
        raise UserInputError(f"cannot read trace: {exc}", file=p) from None
    requests: list[Request] = []
    seen: set[str] = set()
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UserInputError(f"malformed JSON: {exc}", file=p, line=lineno) from None
        if not isinstance(obj, dict):
            raise UserInputError("each line must be a JSON object", file=p, line=lineno)
        for key in ("input_tokens", "output_tokens"):
            if key not in obj:
                raise UserInputError("missing field", file=p, line=lineno, field=key)
        inp = _token_count(obj["input_tokens"], file=p, line=lineno, field="input_tokens")
        out = _token_count(obj["output_tokens"], file=p, line=lineno, field="output_tokens")
        arrival_raw = obj.get("arrival_s", 0.0)
        try:
            arrival = float(arrival_raw)
        except (TypeError, ValueError):
            arrival = float("nan")
        if isinstance(arrival_raw, bool) or not arrival >= 0:
            raise UserInputError(
                f"arrival_s must be a number >= 0, got {arrival_raw!r}",
                file=p,
                line=lineno,
                field="arrival_s",
            )
        rid = str(obj.get("id", lineno))
        if rid in seen:
            raise UserInputError(f"duplicate id {rid!r}", file=p, line=lineno, field="id")
        seen.add(rid)
        tags = obj.get("tags", {})
        if not isinstance(tags, Mapping) or not all(isinstance(v, str) for v in tags.values()):
            raise UserInputError(
                "tags must be an object of strings", file=p, line=lineno, field="tags"
            )
        requests.append(Request(rid, arrival, inp, out, dict(tags)))
    if not requests:
        raise UserInputError("trace is empty", file=p)
    requests.sort(key=lambda r: r.arrival_s)
    return requests


def load_trace(path: str | Path) -> list[Request]:
    """Load a trace by extension: ``.jsonl``/``.json`` as JSONL, anything else as Azure CSV."""
    p = Path(path)
    if p.suffix.lower() in {".jsonl", ".json", ".ndjson"}:
        return load_jsonl(p)
    return load_azure_csv(p)
