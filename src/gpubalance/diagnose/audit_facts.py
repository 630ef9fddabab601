"""What one rank knows about its own launch and placement (gathered by the audit)."""

from __future__ import annotations

import os
import platform
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpubalance.diagnose.nvml import Nvml, NvmlUnavailable, visible_nvml_indices
from gpubalance.diagnose.topology import (
    cpu_affinity,
    gpu_numa,
    memory_policy,
    mems_allowed,
    online_numa_nodes,
)
from gpubalance.diagnose.tracer import default_host

__all__ = ["RankFacts", "collect_facts", "comm_env"]

# variables that must match across ranks (prefixes and exact names)
_ENV_PREFIXES = (
    "NCCL_",
    "GLOO_",
    "TORCH_NCCL_",
    "TORCH_DISTRIBUTED_",
    "TORCH_GLOO_",
    "UCX_",
    "FI_",
    "NVSHMEM_",
    "MASTER_",
    "TP_",
)
_ENV_NAMES = (
    "WORLD_SIZE",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_MODULE_LOADING",
    "OMP_NUM_THREADS",
    "PYTORCH_CUDA_ALLOC_CONF",
    "NVIDIA_TF32_OVERRIDE",
    "LOCAL_WORLD_SIZE",
)
# differ between ranks by design
_PER_RANK = re.compile(r"^(RANK|LOCAL_RANK|GROUP_RANK|ROLE_RANK|.*_RANK)$")


def comm_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The communication/runtime variables of ``environ`` that must match across ranks."""
    env = os.environ if environ is None else environ
    return {
        k: v
        for k, v in env.items()
        if (k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES) and not _PER_RANK.match(k)
    }


@dataclass
class RankFacts:
    """One rank's launch and placement facts (plain data: picklable, JSON-able)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    host: str
    pid: int
    env: dict[str, str]
    cuda_visible_devices: str | None
    versions: dict[str, str]
    cpu_affinity: list[int]
    mems_allowed: list[int]
    memory_policy: str
    online_nodes: list[int]
    device_bdf: str | None = None
    device_uuid: str | None = None
    device_numa: int | None = None
    device_local_cpus: list[int] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)  # every GPU NVML sees on the host
    path_matrix: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _torch_versions() -> tuple[dict[str, str], dict[str, Any] | None]:
    out: dict[str, str] = {}
    dev: dict[str, Any] | None = None
    try:
        import torch
    except ImportError:
        return out, None
    out["torch"] = str(torch.__version__)
    out["cuda_runtime"] = str(torch.version.cuda or "none")
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # NCCL not built in
            out["nccl"] = "none"
        # inside the user's process (CUDA already initialised) the current device is the
        # rank's device; a standalone audit rank picks it as training scripts do:
        # LOCAL_RANK modulo the visible device count
        if torch.cuda.is_initialized():
            idx = torch.cuda.current_device()
        else:
            local = int(os.environ.get("LOCAL_RANK", "0"))
            idx = local % max(torch.cuda.device_count(), 1)
        p = torch.cuda.get_device_properties(idx)
        bdf = None
        bus = getattr(p, "pci_bus_id", None)
        if bus is not None:
            dom = int(getattr(p, "pci_domain_id", 0))
            slot = int(getattr(p, "pci_device_id", 0))
            bdf = f"{dom:04x}:{int(bus):02x}:{slot:02x}.0"
        uuid = str(getattr(p, "uuid", "")) or None
        dev = {"index": idx, "bdf": bdf, "uuid": uuid}
    return out, dev


def collect_facts(
    *,
    rank: int | None = None,
    world_size: int | None = None,
    local_rank: int | None = None,
    gpu_pci: list[str] | None = None,
    sysfs_root: str | Path = "/",
    nvml_module: Any | None = None,
) -> RankFacts:
    """Collect this process's facts.

    ``gpu_pci`` names the PCI addresses of the visible GPUs in device order (for machines
    where CUDA/NVML cannot say, and for tests); the rank's GPU is then
    ``gpu_pci[local_rank]``. Otherwise torch.cuda (the current device) and NVML are asked.
    """
    env = os.environ
    rank = int(env.get("RANK", "0")) if rank is None else rank
    world_size = int(env.get("WORLD_SIZE", "1")) if world_size is None else world_size
    local_rank = int(env.get("LOCAL_RANK", str(rank))) if local_rank is None else local_rank
    versions = {"python": platform.python_version(), "gpubalance": _pkg_version()}
    tv, tdev = _torch_versions()
    versions.update(tv)
    notes: list[str] = []
    facts = RankFacts(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        local_world_size=int(env.get("LOCAL_WORLD_SIZE", "0")),
        host=default_host(),
        pid=os.getpid(),
        env=comm_env(),
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        versions=versions,
        cpu_affinity=sorted(cpu_affinity()),
        mems_allowed=sorted(mems_allowed()),
        memory_policy=memory_policy(),
        online_nodes=sorted(online_numa_nodes(sysfs_root)),
        notes=notes,
    )
    try:
        with Nvml.open(nvml_module) as nv:
            versions["driver"] = nv.driver_version()
            versions["cuda_driver"] = nv.cuda_driver_version()
            devs = nv.devices()
            facts.gpus = [asdict(d) for d in devs]
            facts.path_matrix = nv.path_matrix()
            if gpu_pci is None and tdev is None:
                vis = visible_nvml_indices(devs)
                if vis and local_rank < len(vis):
                    d = devs[vis[local_rank]]
                    facts.device_bdf, facts.device_uuid = d.pci_bus_id, d.uuid
                    notes.append(
                        "device taken as visible GPU number LOCAL_RANK (no CUDA in this process)"
                    )
    except NvmlUnavailable as exc:
        notes.append(str(exc))
    if gpu_pci is not None:
        if gpu_pci:
            facts.device_bdf = gpu_pci[local_rank % len(gpu_pci)].lower()
    elif tdev is not None:
        facts.device_bdf = tdev["bdf"]
        facts.device_uuid = tdev["uuid"]
        if facts.device_uuid and not facts.device_uuid.startswith("GPU-"):
            facts.device_uuid = "GPU-" + facts.device_uuid
    if facts.device_bdf:
        numa = gpu_numa(facts.device_bdf, sysfs_root)
        if numa is None:
            notes.append(f"sysfs has no NUMA information for {facts.device_bdf}")
        else:
            facts.device_numa, local = numa
            facts.device_local_cpus = sorted(local)
    elif not facts.gpus:
        notes.append("no GPU visible to this rank: placement checks against a GPU skipped")
    return facts


def _pkg_version() -> str:
    try:
        from importlib.metadata import version

        return version("gpubalance")
    except Exception:
        return "unknown"


def python_executable() -> str:
    """The interpreter running this rank (reported to spot mixed environments)."""
    return sys.executable
