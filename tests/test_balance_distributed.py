"""Real multi-process runs: samplers under DDP (gloo) and the work queue on a TCPStore."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

WORKER = Path(__file__).with_name("balance_dist_worker.py")
pytestmark = pytest.mark.distributed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(mode: str, world: int, tmp_path: Path) -> list[dict]:  # type: ignore[type-arg]
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(
            os.environ,
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            OMP_NUM_THREADS="1",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), mode, str(tmp_path)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )
    logs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"{mode}: worker hung") from None
        logs.append(out.decode(errors="replace"))
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)[-4000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


def test_cost_balanced_sampler_under_ddp(tmp_path: Path) -> None:
    res = _run("sampler", 2, tmp_path)
    seen0, seen1 = res[0]["seen"], res[1]["seen"]
    assert res[0]["steps"] == res[1]["steps"] == 21  # ceil(ceil(203/2) / 5)
    assert len(seen0) == len(seen1) == 102  # ceil(203 / 2)
    assert res[0]["gathered"] == [seen0, seen1]
    union = seen0 + seen1
    assert set(union) == set(range(203)) and len(union) - 203 == 1  # one padded duplicate


def test_cost_balanced_batch_sampler_under_ddp(tmp_path: Path) -> None:
    res = _run("batch_sampler", 2, tmp_path)
    assert res[0]["steps"] == res[1]["steps"]
    union = res[0]["seen"] + res[1]["seen"]
    assert sorted(union) == list(range(203))  # >= k items: every item exactly once
    assert res[1]["gathered"] == [res[0]["seen"], res[1]["seen"]]


def test_store_work_queue_under_torchrun_like_launch(tmp_path: Path) -> None:
    res = _run("queue", 3, tmp_path)
    claimed = [i for r in res for i in r["claimed"]]
    assert sorted(claimed) == list(range(203))  # every item exactly once, none lost
    assert all(r["done"] == 203 for r in res)


def test_store_work_queue_with_raw_tcpstore_processes(tmp_path: Path) -> None:
    """Parent hosts a TCPStore; worker processes (no process group) pull from it."""
    from datetime import timedelta

    import torch.distributed as dist

    store = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60)
    )
    code = (
        "import sys, json, time, torch.distributed as dist;"
        "from datetime import timedelta;"
        "from gpubalance.balance import StoreWorkQueue;"
        "s = dist.TCPStore('127.0.0.1', int(sys.argv[1]), is_master=False,"
        " timeout=timedelta(seconds=60));"
        "q = StoreWorkQueue(s, 1000, 4, name='raw', factor=2.0);"
        "got = [];"
        "[(got.extend(c.tolist()), time.sleep(0.001)) for c in q];"
        "q.add_done(len(got));"
        "print(json.dumps(got))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(store.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    got: list[int] = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-2000:]
        got.extend(json.loads(out))
    assert sorted(got) == list(range(1000))
    assert int(store.add("raw/done", 0)) == 1000
    assert np.unique(got).shape[0] == 1000
