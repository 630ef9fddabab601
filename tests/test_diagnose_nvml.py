"""NVML telemetry: the sampler and tracer with a fake NVML (no GPU here), the real
"NVML absent" path (nvidia-ml-py installed, no driver), and telemetry in the diagnosis."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from rich.console import Console

from gpubalance.diagnose.analyzer import analyze
from gpubalance.diagnose.format import (
    CAT_COMPUTE,
    CAT_SYNC,
    KIND_COLL,
    KIND_PHASE,
    KIND_STEP,
    RECORD_DTYPE,
    name_record,
    write_trace_file,
)
from gpubalance.diagnose.load import load_traces
from gpubalance.diagnose.monitor import sample_loop
from gpubalance.diagnose.nvml import Nvml, NvmlSampler
from gpubalance.diagnose.tracer import PhaseTracer
from gpubalance.report.monitor import samples_table
from test_audit_checks import FakeNvml


def _wait_lines(path, n, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.02)


def test_sampler_writes_labelled_samples(tmp_path):
    path = tmp_path / "nvml-rank00003.jsonl"
    s = NvmlSampler(path, interval_s=0.01, rank=3, indices=[2], module=FakeNvml())
    assert not path.exists()  # nothing in the constructor
    s.start()
    _wait_lines(path, 3)
    s.stop()
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(recs) >= 3 and s.samples_written == len(recs)
    assert {(r["rank"], r["index"], r["uuid"]) for r in recs} == {(3, 2, "GPU-00000002")}
    assert recs[0]["util_gpu_pct"] == 70.0 and recs[0]["mem_used_bytes"] == 3 * 2**30


def test_tracer_samples_its_gpu_beside_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    tr = PhaseTracer(
        tmp_path,
        rank=1,
        world_size=2,
        run_id="n",
        cuda_events=False,
        nvml_interval_s=0.01,
        nvml_module=FakeNvml(),
    )
    with tr:
        with tr.step():
            pass
        _wait_lines(tmp_path / "nvml-rank00001.jsonl", 2)
    recs = [json.loads(x) for x in (tmp_path / "nvml-rank00001.jsonl").read_text().splitlines()]
    # local rank 1 under CUDA_VISIBLE_DEVICES=2,3 is NVML GPU 3
    assert {(r["rank"], r["index"]) for r in recs} == {(1, 3)}


def test_tracer_without_nvml_says_so_and_traces_on(tmp_path):
    tr = PhaseTracer(
        tmp_path,
        rank=0,
        world_size=1,
        run_id="x",
        nvml_interval_s=0.1,
        nvml_module=FakeNvml(fail=True),
    )
    with pytest.warns(RuntimeWarning, match="NVML telemetry off"):
        tr.start()
    with tr.step():
        pass
    tr.close()
    assert "Driver Not Loaded" in tr.notes[0]
    assert (tmp_path / "rank00000.gpbt").exists()


def test_monitor_rounds_and_table():
    with Nvml.open(FakeNvml()) as nv:
        rounds = list(sample_loop(nv, 0.0, count=2, sleep=lambda _s: None))
    assert [len(s) for s, _e in rounds] == [4, 4]
    con = Console(record=True, width=200)
    con.print(samples_table(rounds[0][0]))
    text = con.export_text()
    assert "1980" in text and "1.0 / 80 GiB" in text and "350" in text


def test_monitor_cli_without_nvml_exits_1_with_reason():
    proc = subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "monitor", "--count", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "no GPU telemetry to show" in proc.stderr and "Traceback" not in proc.stderr


def test_diagnosis_reports_throttled_sm_clock(tmp_path):
    ms = 1_000_000
    for rank in range(3):
        rows = [name_record(1, "compute", CAT_COMPUTE), name_record(2, "all_reduce", CAT_SYNC)]
        comp = 30 if rank == 1 else 10
        for s in range(50):
            t = s * 40 * ms
            rows.append((s, 1, KIND_PHASE, 1, t, comp * ms, 0.0))
            rows.append((s, 2, KIND_COLL, 1, t + comp * ms, (32 - comp) * ms, 0.0))
            rows.append((s, 0, KIND_STEP, 0, t, 32 * ms, 0.0))
        hdr = {
            "run_id": "thr",
            "rank": rank,
            "world_size": 3,
            "host": "n0",
            "start_unix_ns": 0,
            "version": 1,
        }
        write_trace_file(tmp_path / f"rank{rank:05d}.gpbt", hdr, np.array(rows, RECORD_DTYPE))
        clock = 1200.0 if rank == 1 else 1980.0
        lines = [
            json.dumps(
                {
                    "rank": rank,
                    "util_gpu_pct": 99,
                    "sm_clock_mhz": clock,
                    "power_w": 300,
                    "temperature_c": 85,
                    "mem_used_bytes": 1,
                }
            )
            for _ in range(4)
        ]
        (tmp_path / f"nvml-rank{rank:05d}.jsonl").write_text("\n".join([*lines, "{oops"]) + "\n")
    d = analyze(load_traces(tmp_path))
    top = d.findings[0]
    assert (top.kind, top.rank, top.phase) == ("slow_compute", 1, "compute")
    assert "SM clock 1200 MHz vs 1980 MHz" in top.title
    assert top.evidence["gpu_telemetry"]["samples"] == 4.0
    assert any("nvml-rank00000.jsonl:5" in p for p in d.problems)
