"""Audit inside real multi-process gloo jobs (launched like torchrun) with a misconfigured
rank injected: the report names that rank and the cause.

The GPU's NUMA node cannot exist on this machine, so the wrong-affinity scenario describes
two GPUs in a fake sysfs tree (GPU 0 local to CPU 0, GPU 1 local to CPU 1) and pins rank 1
to CPU 0 with os.sched_setaffinity before it starts; the affinity itself is the real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpubalance.diagnose.launch import launch_local

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(240)]


def _rank0_json(results):
    for r in results:
        assert r.returncode in (0, 1), r.stderr[-2000:]
    assert all(not r.stdout.strip() for r in results[1:])  # only rank 0 reports
    return json.loads(results[0].stdout.strip().splitlines()[-1]), results[0].returncode


def test_mismatched_env_var_on_one_rank():
    env = [
        {"NCCL_SOCKET_IFNAME": "eth0"},
        {"NCCL_SOCKET_IFNAME": "eth0"},
        {"NCCL_SOCKET_IFNAME": "ib0"},
    ]
    res = launch_local(
        "gpubalance.cli.main", ["audit", "--json"], 3, env_per_rank=env, timeout_s=180
    )
    doc, rc = _rank0_json(res)
    assert rc == 1
    assert doc["n_ranks"] == 3 and doc["nodes"] == {doc["ranks"][0]["host"]: [0, 1, 2]}
    errs = [f for f in doc["findings"] if f["severity"] == "error"]
    assert [(f["check"], f["rank"], f["evidence"]["variable"]) for f in errs] == [
        ("env_mismatch", 2, "NCCL_SOCKET_IFNAME")
    ]
    assert errs[0]["evidence"]["value"] == "ib0" and errs[0]["evidence"]["majority"] == "eth0"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_wrong_cpu_affinity_against_gpu_numa_node(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    for bdf, node, cpu in (("0000:01:00.0", 0, cpus[0]), ("0000:81:00.0", 1, cpus[1])):
        d = tmp_path / "sys/bus/pci/devices" / bdf
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{node}\n")
        (d / "local_cpulist").write_text(f"{cpu}\n")
    args = [
        "audit",
        "--json",
        "--sysfs-root",
        str(tmp_path),
        "--gpu-pci",
        "0000:01:00.0,0000:81:00.0",
    ]
    # rank 0 correctly on its GPU's CPU; rank 1 pinned to rank 0's CPU (wrong node)
    res = launch_local(
        "gpubalance.cli.main", args, 2, affinity_per_rank=[{cpus[0]}, {cpus[0]}], timeout_s=180
    )
    doc, rc = _rank0_json(res)
    assert rc == 1
    errs = [f for f in doc["findings"] if f["severity"] == "error"]
    assert [(f["check"], f["rank"]) for f in errs] == [("cpu_affinity", 1)]
    ev = errs[0]["evidence"]
    assert ev["gpu"] == "0000:81:00.0" and ev["gpu_numa_node"] == 1
    assert ev["cpu_affinity"] == str(cpus[0]) and ev["gpu_local_cpus"] == str(cpus[1])
    assert [r["cpu_affinity"] for r in doc["ranks"]] == [[cpus[0]], [cpus[0]]]


def test_cli_nproc_launches_its_own_ranks():
    proc = subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "audit", "--nproc", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["n_ranks"] == 2 and doc["ok"] is True
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
