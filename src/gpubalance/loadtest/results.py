"""A load test's results and their JSON file (what ``gpubalance calibrate`` reads).

File format (``format: gpubalance-loadtest/1``): an object with ``url``, ``kind``,
``model``, ``stream``, ``gpus``, ``mode``, ``runs`` (each a run summary as in
:meth:`RunSummary.to_dict`, plus ``records``: the per-request records of
:meth:`RequestRecord.to_dict` when written with records) and ``goodput`` (``best_rps``,
``first_fail_rps``, ``sla``, ``trials``) or null. For scripts, the top level also carries
the first run's ``latency_s`` and ``throughput_rps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gpubalance.loadtest.config import LoadTestConfig
from gpubalance.loadtest.goodput import GoodputResult
from gpubalance.loadtest.records import RequestRecord
from gpubalance.loadtest.stats import RunSummary

__all__ = ["FORMAT", "LoadTestResult", "RunResult", "write_json_atomic"]

FORMAT = "gpubalance-loadtest/1"


@dataclass(slots=True)
class RunResult:
    """One run: its summary and its per-request records."""

    summary: RunSummary
    records: list[RequestRecord]


@dataclass(slots=True)
class LoadTestResult:
    """Every run of one invocation, and the goodput search if there was one."""

    config: LoadTestConfig
    runs: list[RunResult] = field(default_factory=list)
    goodput: GoodputResult | None = None

    def to_dict(self, *, records: bool = True) -> dict[str, Any]:
        """JSON-ready dict; ``records=False`` leaves per-request records out."""
        ep = self.config.endpoint
        runs = []
        for run in self.runs:
            d = run.summary.to_dict()
            if records:
                d["records"] = [r.to_dict() for r in run.records]
            runs.append(d)
        doc: dict[str, Any] = {
            "format": FORMAT,
            "url": ep.url,
            "kind": ep.kind,
            "model": ep.model,
            "stream": ep.streaming,
            "gpus": self.config.gpus,
            "mode": self.config.mode,
            "shape": self.config.shape,
            "latency_s": runs[0]["latency_s"] if runs else None,
            "throughput_rps": runs[0]["throughput_rps"] if runs else None,
            "runs": runs,
            "goodput": None,
        }
        if self.goodput is not None:
            g = self.goodput
            assert self.config.sla is not None
            doc["goodput"] = {
                "best_rps": g.best_rps,
                "first_fail_rps": g.first_fail_rps,
                "best_rps_per_gpu": None if g.best_rps is None else g.best_rps / self.config.gpus,
                "sla": [str(t) for t in self.config.sla.targets],
                "max_error_rate": self.config.sla.max_error_rate,
                "trials": [
                    {"rate_rps": rate, "passed": not why, "violations": why, "label": s.label}
                    for rate, s, why in g.trials
                ],
            }
        return doc


def write_json_atomic(path: str | Path, doc: Any) -> None:
    """Write ``doc`` as JSON via a temporary file and rename (no half-written file)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    tmp.replace(p)
