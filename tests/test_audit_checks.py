"""Audit rules over hand-built facts, sysfs parsing, and fact collection with a fake NVML
(NVML cannot exist on this machine; the fake stands in for the GPU driver only)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from gpubalance.diagnose.audit import audit
from gpubalance.diagnose.audit_facts import RankFacts, collect_facts, comm_env
from gpubalance.diagnose.nvml import Nvml, NvmlUnavailable, normalize_bdf
from gpubalance.diagnose.topology import (
    format_cpulist,
    gpu_numa,
    memory_policy,
    mems_allowed,
    parse_cpulist,
)


def _facts(rank: int, **kw) -> RankFacts:
    base = RankFacts(
        rank=rank,
        world_size=kw.pop("world_size", 4),
        local_rank=rank,
        local_world_size=0,
        host="n0",
        pid=100 + rank,
        env={"NCCL_IB_DISABLE": "0", "MASTER_ADDR": "10.0.0.1"},
        cuda_visible_devices=None,
        versions={"torch": "2.5.1", "nccl": "2.21.5", "driver": "550.54"},
        cpu_affinity=[0, 1, 2, 3],
        mems_allowed=[0, 1],
        memory_policy="default",
        online_nodes=[0, 1],
    )
    return replace(base, **kw)


def test_cpulist_round_trip():
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert format_cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert parse_cpulist("") == set()


def test_clean_job_has_no_findings():
    rep = audit([_facts(r) for r in range(4)])
    assert rep.ok and rep.nodes == {"n0": [0, 1, 2, 3]}


def test_env_mismatch_names_the_odd_rank():
    fs = [_facts(r) for r in range(4)]
    fs[2] = replace(fs[2], env={**fs[2].env, "NCCL_IB_DISABLE": "1"})
    fs[3] = replace(fs[3], env={"MASTER_ADDR": "10.0.0.1"})  # NCCL_IB_DISABLE unset
    rep = audit(fs)
    env = [f for f in rep.findings if f.check == "env_mismatch"]
    assert sorted((f.ranks, f.evidence["value"]) for f in env) == [([2], "1"), ([3], "<unset>")]
    assert all(f.evidence["majority"] == "0" for f in env)
    msg = next(f.message for f in env if f.ranks == [2])
    assert msg == "NCCL_IB_DISABLE=1 on rank 2, NCCL_IB_DISABLE=0 on the other ranks"


def test_version_mismatch_and_missing_rank():
    fs = [_facts(r) for r in range(3)]  # rank 3 of 4 never reported
    fs[1] = replace(fs[1], host="n1", versions={**fs[1].versions, "nccl": "2.18.1"})
    rep = audit(fs)
    v = next(f for f in rep.findings if f.check == "version_mismatch")
    assert v.ranks == [1] and v.host == "n1" and v.evidence["value"] == "2.18.1"
    assert next(f for f in rep.findings if f.check == "ranks_missing").ranks == [3]


def test_two_processes_on_one_device_and_device_order():
    fs = [
        _facts(r, world_size=2, cuda_visible_devices="0,1", device_bdf="0000:3b:00.0")
        for r in range(2)
    ]
    fs[1] = replace(fs[1], cuda_visible_devices="1,0")
    rep = audit(fs)
    share = next(f for f in rep.findings if f.check == "process_per_device")
    assert share.ranks == [0, 1]
    order = next(f for f in rep.findings if f.check == "visible_device_order")
    assert "different order" in order.message
    dev_order = next(f for f in rep.findings if f.check == "device_order")
    assert dev_order.ranks == [0, 1] and "PCI_BUS_ID" in dev_order.fix


def test_affinity_against_gpu_numa_node():
    fs = [
        _facts(
            0,
            world_size=2,
            device_bdf="0000:01:00.0",
            device_numa=0,
            device_local_cpus=[0, 1],
            cpu_affinity=[0, 1],
        ),
        _facts(
            1,
            world_size=2,
            device_bdf="0000:81:00.0",
            device_numa=1,
            device_local_cpus=[2, 3],
            cpu_affinity=[0],
        ),
    ]
    rep = audit(fs)
    aff = [f for f in rep.findings if f.check == "cpu_affinity"]
    assert len(aff) == 1 and aff[0].ranks == [1] and aff[0].severity == "error"
    assert "--cpunodebind=1" in aff[0].fix
    assert aff[0].evidence["gpu_local_cpus"] == "2-3"


def test_memory_restricted_away_from_gpu_node():
    f = _facts(
        0,
        world_size=1,
        device_bdf="0000:81:00.0",
        device_numa=1,
        device_local_cpus=[2, 3],
        cpu_affinity=[2, 3],
        mems_allowed=[0],
    )
    g = replace(f, mems_allowed=[0, 1], memory_policy="bind:0")
    assert [a.check for a in audit([f]).findings] == ["memory_policy"]
    assert "bind:0" in audit([g]).findings[0].message


def test_proc_parsers():
    assert mems_allowed("Name:\tx\nMems_allowed_list:\t0-1,3\n") == {0, 1, 3}
    maps = "55d0 default file=/usr/bin/python3\n55d1 bind:1 heap anon=3\n"
    assert memory_policy(maps) == "bind:1"


def test_gpu_numa_from_fake_sysfs(tmp_path):
    dev = tmp_path / "sys/bus/pci/devices/0000:81:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("1\n")
    (dev / "local_cpulist").write_text("8-15\n")
    assert gpu_numa("0000:81:00.0", tmp_path) == (1, set(range(8, 16)))
    assert gpu_numa("0000:01:00.0", tmp_path) is None


class FakeNvml:
    """Stands in for pynvml: 4 GPUs; NVLink pairs (0,1) and (2,3), SYS across; GPU 3
    reports its NVLink to GPU 2 down (one-sided), so the matrix is asymmetric."""

    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_CLOCK_SM, NVML_TEMPERATURE_GPU, NVML_NVLINK_MAX_LINKS = 1, 0, 4
    BUS = ("00000000:01:00.0", "00000000:02:00.0", "00000000:81:00.0", "00000000:82:00.0")

    class NVMLError(Exception):
        pass

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.inited = 0

    def nvmlInit(self):
        if self.fail:
            raise self.NVMLError("Driver Not Loaded")
        self.inited += 1

    def nvmlShutdown(self):
        self.inited -= 1

    def nvmlDeviceGetCount(self):
        return 4

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h:08d}"

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100"

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=self.BUS[h].encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=80 * 2**30, used=(h + 1) * 2**30)

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    def nvmlDeviceGetNvLinkState(self, h, link):
        peer = {0: 1, 1: 0, 2: 3, 3: 2}[h]
        if h == 3 or link >= 2:
            return 0
        return 1 if peer is not None else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        peer = {0: 1, 1: 0, 2: 3, 3: 2}[h]
        return SimpleNamespace(busId=self.BUS[peer])

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 40 if (a < 2) == (b < 2) else 50

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=90 - 10 * h, memory=40)

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        return 1000 if counter == self.NVML_PCIE_UTIL_TX_BYTES else 2000

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetPowerUsage(self, h):
        return 350_000

    def nvmlDeviceGetTemperature(self, h, kind):
        return 60


def test_nvml_unavailable_reason():
    with pytest.raises(NvmlUnavailable, match="Driver Not Loaded"):
        Nvml.open(FakeNvml(fail=True))
    assert normalize_bdf(b"00000000:3B:00.0") == "0000:3b:00.0"


def test_path_matrix_and_samples_from_fake_nvml():
    fake = FakeNvml()
    with Nvml.open(fake) as nv:
        m = nv.path_matrix()
        s = nv.sample(1, rank=5)
    assert fake.inited == 0  # shut down on exit
    assert m[0] == ["X", "NV2", "SYS", "SYS"]
    assert m[2][3] == "NV2" and m[3][2] == "NODE"  # one side reports its links down
    assert (s.rank, s.uuid, s.util_gpu_pct, s.power_w) == (5, "GPU-00000001", 80.0, 350.0)
    assert (s.pcie_tx_bytes_s, s.pcie_rx_bytes_s) == (1024000.0, 2048000.0)


def test_collect_facts_with_fake_nvml_and_sysfs(tmp_path, monkeypatch):
    for bdf, node, cpus in (("0000:01:00.0", 0, "0"), ("0000:02:00.0", 0, "0")):
        d = tmp_path / "sys/bus/pci/devices" / bdf
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{node}\n")
        (d / "local_cpulist").write_text(cpus)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    f = collect_facts(
        rank=0, world_size=1, local_rank=0, sysfs_root=tmp_path, nvml_module=FakeNvml()
    )
    # visible device 0 is NVML GPU 1 under CUDA_VISIBLE_DEVICES=1,0
    assert (f.device_bdf, f.device_uuid, f.device_numa) == ("0000:02:00.0", "GPU-00000001", 0)
    assert f.versions["driver"] == "550.54.15" and f.versions["cuda_driver"] == "12.4"
    assert f.env["NCCL_DEBUG"] == "INFO" and len(f.gpus) == 4
    rep = audit([f])
    checks = {a.check for a in rep.findings}
    assert {"path_asymmetric", "path_uneven", "device_order"} <= checks
    asym = next(a for a in rep.findings if a.check == "path_asymmetric")
    assert "GPU2->GPU3 NV2 but GPU3->GPU2 NODE" in asym.message


def test_comm_env_filters_per_rank_variables():
    env = {
        "NCCL_ALGO": "Ring",
        "RANK": "3",
        "LOCAL_RANK": "1",
        "HOME": "/root",
        "MASTER_PORT": "29500",
        "OMP_NUM_THREADS": "4",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
    }
    assert comm_env(env) == {
        "NCCL_ALGO": "Ring",
        "MASTER_PORT": "29500",
        "OMP_NUM_THREADS": "4",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
    }
