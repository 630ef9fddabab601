"""Collective benchmark: nccl-tests bandwidth factors by hand, and real gloo jobs that
expose a late rank and measure intra- and inter-node groups apart."""

from __future__ import annotations

import json

import pytest

from gpubalance.diagnose.bandwidth import algbw_bytes_s, bus_factor, busbw_bytes_s, parse_size
from gpubalance.diagnose.launch import launch_local
from gpubalance.errors import UserInputError


def test_bus_factors_match_nccl_tests():
    # nccl-tests PERFORMANCE.md: allreduce 2(n-1)/n, allgather/reducescatter (n-1)/n, bcast 1
    assert bus_factor("all_reduce", 8) == 1.75
    assert bus_factor("all_gather", 8) == 0.875
    assert bus_factor("reduce_scatter", 4) == 0.75
    assert bus_factor("broadcast", 16) == 1.0
    assert bus_factor("all_reduce", 1) == 0.0
    # 1 GiB all-reduce in 0.1 s on 4 ranks: algbw 10.737 GB/s, busbw 1.5x that
    assert algbw_bytes_s(2**30, 0.1) == pytest.approx(10.73741824e9)
    assert busbw_bytes_s("all_reduce", 2**30, 0.1, 4) == pytest.approx(16.10612736e9)
    with pytest.raises(UserInputError, match="unknown collective"):
        bus_factor("alltoallv", 4)


def test_parse_size():
    assert [parse_size(s) for s in ("512", "4K", "1M", "2g", "64KB")] == [
        512,
        4096,
        1 << 20,
        2 << 30,
        65536,
    ]
    with pytest.raises(UserInputError):
        parse_size("lots")


def _run(nproc, extra, hosts=None):
    args = ["collectives", "--json", "--iters", "6", "--warmup", "1", *extra]
    res = launch_local("gpubalance.cli.main", args, nproc, nnodes_hosts=hosts, timeout_s=200)
    for r in res:
        assert r.returncode == 0, r.stderr[-2000:]
    assert all(not r.stdout.strip() for r in res[1:])
    return json.loads(res[0].stdout.strip().splitlines()[-1])


@pytest.mark.distributed
@pytest.mark.timeout(240)
def test_late_rank_is_named():
    # symmetric collectives: every rank needs every other rank's data, so all wait for a
    # late one (a broadcast's receivers need not wait for each other: only its root does)
    doc = _run(
        3,
        [
            "--sizes",
            "4K",
            "--ops",
            "all_reduce,all_gather",
            "--delay-rank",
            "2",
            "--delay-ms",
            "25",
            "--no-p2p",
        ],
    )
    assert doc["backend"] == "gloo" and doc["world_size"] == 3
    rows = doc["rows"]
    assert {(r["op"], r["size_bytes"]) for r in rows} == {
        ("all_reduce", 4092),
        ("all_gather", 4092),
    }
    for r in rows:
        # the op's time is the slowest rank's; the others waited ~25 ms for rank 2
        assert r["time_s"] == max(r["rank_time_s"].values())
        assert r["rank_time_s"]["0"] > 0.020 and r["rank_time_s"]["2"] < 0.010
        assert r["late_rank"] == 2
    late = [f for f in doc["findings"] if f["check"] == "late_rank"]
    assert [f["rank"] for f in late] == [2]


@pytest.mark.distributed
@pytest.mark.timeout(240)
def test_intra_and_inter_node_groups_apart():
    doc = _run(4, ["--sizes", "64K", "--ops", "all_reduce"], hosts=["a", "a", "b", "b"])
    groups = {(r["group"], r["kind"], r["n_ranks"]) for r in doc["rows"]}
    assert groups == {
        ("world", "world", 4),
        ("intra:a", "intra", 2),
        ("intra:b", "intra", 2),
        ("inter:local0", "inter", 2),
        ("inter:local1", "inter", 2),
    }
    intra_a = next(r for r in doc["rows"] if r["group"] == "intra:a")
    assert set(intra_a["rank_time_s"]) == {"0", "1"}
    inter1 = next(r for r in doc["rows"] if r["group"] == "inter:local1")
    assert set(inter1["rank_time_s"]) == {"1", "3"}
    m = doc["p2p_bw_bytes_s"]
    assert all((m[i][j] > 0) == (i != j) for i in range(4) for j in range(4))
    assert any(f["check"] == "intra_vs_inter" for f in doc["findings"])
