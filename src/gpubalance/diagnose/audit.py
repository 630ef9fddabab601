"""Audit the launch: compare every rank's facts and report each mismatch with its fix.

Checks: one process per device; visible-device order and CUDA_DEVICE_ORDER; communication
env vars identical across ranks; torch/CUDA/NCCL/driver versions identical; each rank's CPU
affinity and memory policy against its GPU's NUMA node; the GPU path matrix (NVLink/PCIe
levels) symmetric and uniform; which ranks share a node.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from gpubalance.diagnose.audit_facts import RankFacts
from gpubalance.diagnose.nvml import LEVEL_ORDER
from gpubalance.diagnose.topology import format_cpulist, policy_nodes

__all__ = ["AuditFinding", "AuditReport", "audit"]

UNSET = "<unset>"


@dataclass
class AuditFinding:
    """One mismatch: ``check`` names the rule, ``ranks`` the ranks at fault."""

    check: str
    severity: str  # "error" / "warning"
    ranks: list[int]
    host: str | None
    message: str
    fix: str
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int | None:
        return self.ranks[0] if len(self.ranks) == 1 else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rank"] = self.rank
        return d


@dataclass
class AuditReport:
    """All findings plus the per-node layout."""

    world_size: int
    n_ranks: int
    nodes: dict[str, list[int]]
    findings: list[AuditFinding]
    facts: list[RankFacts]

    @property
    def ok(self) -> bool:
        return not self.findings

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditReport:
        """Rebuild a report from :meth:`to_dict` output (e.g. a worker's JSON)."""
        findings = [
            AuditFinding(**{k: v for k, v in f.items() if k != "rank"}) for f in d["findings"]
        ]
        return cls(
            world_size=int(d["world_size"]),
            n_ranks=int(d["n_ranks"]),
            nodes={str(h): list(r) for h, r in d["nodes"].items()},
            findings=findings,
            facts=[RankFacts(**r) for r in d["ranks"]],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "n_ranks": self.n_ranks,
            "nodes": self.nodes,
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
            "ranks": [f.to_dict() for f in self.facts],
        }


def _ranks_str(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, sorted(ranks)))


def _majority_split(values: dict[int, str]) -> tuple[str, dict[str, list[int]]]:
    """Most common value and the ranks holding each other value."""
    counts = Counter(values.values())
    top = max(counts, key=lambda v: (counts[v], v == UNSET, v))
    odd: dict[str, list[int]] = defaultdict(list)
    for r, v in sorted(values.items()):
        if v != top:
            odd[v].append(r)
    return top, dict(odd)


def audit(facts: list[RankFacts]) -> AuditReport:
    """Run every check over the gathered facts (one entry per rank)."""
    facts = sorted(facts, key=lambda f: f.rank)
    out: list[AuditFinding] = []
    nodes: dict[str, list[int]] = defaultdict(list)
    for f in facts:
        nodes[f.host].append(f.rank)
    world = max((f.world_size for f in facts), default=0)

    # ranks present / missing
    missing = sorted(set(range(world)) - {f.rank for f in facts})
    if missing:
        out.append(
            AuditFinding(
                "ranks_missing",
                "error",
                missing,
                None,
                f"{_ranks_str(missing)} of world size {world} did not report",
                "Check that every node started its processes (same --nnodes/--nproc-per-node).",
            )
        )

    # one process per device
    by_dev: dict[tuple[str, str], list[int]] = defaultdict(list)
    for f in facts:
        key = f.device_uuid or f.device_bdf
        if key:
            by_dev[(f.host, key)].append(f.rank)
    for (host, dev), ranks in sorted(by_dev.items()):
        if len(ranks) > 1:
            out.append(
                AuditFinding(
                    "process_per_device",
                    "error",
                    ranks,
                    host,
                    f"{_ranks_str(ranks)} on {host} share GPU {dev}",
                    "Run one process per GPU: select the device from LOCAL_RANK "
                    "(torch.cuda.set_device(local_rank)) and do not remap "
                    "CUDA_VISIBLE_DEVICES in the script when torchrun already assigns it.",
                    {"device": dev},
                )
            )
    for host, ranks in sorted(nodes.items()):
        n_gpus = max((len(f.gpus) for f in facts if f.host == host), default=0)
        if n_gpus and len(ranks) > n_gpus:
            out.append(
                AuditFinding(
                    "process_per_device",
                    "error",
                    ranks,
                    host,
                    f"{len(ranks)} ranks on {host} but only {n_gpus} GPU(s)",
                    "Set --nproc-per-node to the number of GPUs on the node.",
                )
            )

    # visible devices: same set in a different order on one host
    for host in sorted(nodes):
        cvd = {f.rank: f.cuda_visible_devices for f in facts if f.host == host}
        multi = {r: v for r, v in cvd.items() if v is not None and "," in v}
        if len(set(multi.values())) > 1:
            top, odd = _majority_split({r: str(v) for r, v in multi.items()})
            for val, rs in odd.items():
                same_set = sorted(val.split(",")) == sorted(top.split(","))
                out.append(
                    AuditFinding(
                        "visible_device_order",
                        "error",
                        rs,
                        host,
                        f"CUDA_VISIBLE_DEVICES={val} on {_ranks_str(rs)}, {top} on the "
                        f"others of {host}" + (" (same GPUs, different order)" if same_set else ""),
                        "Export one CUDA_VISIBLE_DEVICES for all ranks of a node (or none) and "
                        "pick the device by LOCAL_RANK; keep the order identical in shells, "
                        "services and containers.",
                        {"value": val, "majority": top},
                    )
                )
        many = [f for f in facts if f.host == host and _n_visible(f) > 1]
        unordered = [f.rank for f in many if f.env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID"]
        if unordered:
            out.append(
                AuditFinding(
                    "device_order",
                    "warning",
                    unordered,
                    host,
                    f"CUDA_DEVICE_ORDER is not PCI_BUS_ID on {_ranks_str(unordered)} ({host}): "
                    "CUDA numbers GPUs fastest-first, nvidia-smi/NVML by PCI bus",
                    "export CUDA_DEVICE_ORDER=PCI_BUS_ID on every rank so device numbers "
                    "mean the same GPU everywhere.",
                )
            )

    # env vars identical across ranks
    if len(facts) > 1:
        keys = sorted({k for f in facts for k in f.env})
        for k in keys:
            values = {f.rank: f.env.get(k, UNSET) for f in facts}
            if len(set(values.values())) < 2:
                continue
            top, odd = _majority_split(values)
            for val, rs in odd.items():
                out.append(
                    AuditFinding(
                        "env_mismatch",
                        "error",
                        rs,
                        None,
                        f"{k}={val} on {_ranks_str(rs)}, {k}={top} on the other ranks",
                        f"Set {k} once in the launcher so every rank gets the same value "
                        "(not in per-node shell profiles or per-rank scripts).",
                        {"variable": k, "value": val, "majority": top},
                    )
                )

    # versions identical across ranks
    if len(facts) > 1:
        for k in sorted({k for f in facts for k in f.versions}):
            values = {f.rank: f.versions.get(k, UNSET) for f in facts}
            if len(set(values.values())) < 2:
                continue
            top, odd = _majority_split(values)
            for val, rs in odd.items():
                hosts = sorted({f.host for f in facts if f.rank in rs})
                out.append(
                    AuditFinding(
                        "version_mismatch",
                        "error",
                        rs,
                        hosts[0] if len(hosts) == 1 else None,
                        f"{k} {val} on {_ranks_str(rs)} ({', '.join(hosts)}), {top} elsewhere",
                        f"Install the same {k} on every node (one container image or "
                        "environment for the whole job).",
                        {"component": k, "value": val, "majority": top},
                    )
                )

    # CPU affinity and memory policy against the GPU's NUMA node
    for f in facts:
        out.extend(_placement(f))
    out.extend(_affinity_overlaps(facts))

    # GPU path matrix per host
    seen_hosts: set[str] = set()
    for f in facts:
        if f.host in seen_hosts or not f.path_matrix:
            continue
        seen_hosts.add(f.host)
        out.extend(_paths(f))

    # ranks per node
    sizes = {h: len(r) for h, r in nodes.items()}
    if len(set(sizes.values())) > 1:
        out.append(
            AuditFinding(
                "uneven_nodes",
                "warning",
                [],
                None,
                "nodes run different numbers of ranks: "
                + ", ".join(f"{h}: {n}" for h, n in sorted(sizes.items())),
                "Use the same --nproc-per-node on every node unless the nodes differ on "
                "purpose; uneven nodes make intra-node collectives uneven.",
            )
        )
    for f in facts:
        if f.local_world_size and f.local_world_size != sizes[f.host]:
            out.append(
                AuditFinding(
                    "local_world_size",
                    "warning",
                    [f.rank],
                    f.host,
                    f"rank {f.rank}: LOCAL_WORLD_SIZE={f.local_world_size} but "
                    f"{sizes[f.host]} rank(s) report host {f.host}",
                    "Check the launcher's node assignment (two nodes with the same hostname, "
                    "or a wrong --nproc-per-node).",
                )
            )
    sev = {"error": 0, "warning": 1}
    out.sort(key=lambda a: (sev.get(a.severity, 2), a.check, a.ranks))
    return AuditReport(
        world_size=world,
        n_ranks=len(facts),
        nodes={h: sorted(r) for h, r in sorted(nodes.items())},
        findings=out,
        facts=facts,
    )


def _n_visible(f: RankFacts) -> int:
    if f.cuda_visible_devices is not None:
        return len([t for t in f.cuda_visible_devices.split(",") if t.strip()])
    return len(f.gpus)


def _placement(f: RankFacts) -> list[AuditFinding]:
    out: list[AuditFinding] = []
    if f.device_numa is None or f.device_numa < 0:
        return out
    aff = set(f.cpu_affinity)
    local = set(f.device_local_cpus)
    gpu = f.device_bdf or f.device_uuid or "?"
    ev = {
        "gpu": gpu,
        "gpu_numa_node": f.device_numa,
        "gpu_local_cpus": format_cpulist(local),
        "cpu_affinity": format_cpulist(aff),
    }
    if local and aff and not (aff & local):
        out.append(
            AuditFinding(
                "cpu_affinity",
                "error",
                [f.rank],
                f.host,
                f"rank {f.rank} runs on CPUs {format_cpulist(aff)}, none of them on NUMA node "
                f"{f.device_numa} of its GPU {gpu} (local CPUs {format_cpulist(local)})",
                f"Pin rank {f.rank} to its GPU's CPUs: numactl --cpunodebind={f.device_numa} "
                f"--membind={f.device_numa} (or torchrun --numa-binding=node, or "
                f"os.sched_setaffinity(0, {{{format_cpulist(local)}}})).",
                ev,
            )
        )
    elif local and aff and not aff <= local:
        out.append(
            AuditFinding(
                "cpu_affinity",
                "warning",
                [f.rank],
                f.host,
                f"rank {f.rank} may run on CPUs outside NUMA node {f.device_numa} of its GPU "
                f"{gpu}: affinity {format_cpulist(aff)}, local {format_cpulist(local)}",
                f"Pin rank {f.rank} to CPUs {format_cpulist(local)} (numactl "
                f"--cpunodebind={f.device_numa}) so its threads stay near the GPU.",
                ev,
            )
        )
    online = set(f.online_nodes)
    mems = set(f.mems_allowed)
    if mems and online and mems != online and f.device_numa not in mems:
        out.append(
            AuditFinding(
                "memory_policy",
                "error",
                [f.rank],
                f.host,
                f"rank {f.rank} may allocate only on NUMA node(s) {format_cpulist(mems)}, not on "
                f"node {f.device_numa} of its GPU {gpu}",
                f"Allow node {f.device_numa} (cpuset.mems / numactl --membind={f.device_numa}).",
                {**ev, "mems_allowed": format_cpulist(mems)},
            )
        )
    bound = policy_nodes(f.memory_policy)
    if bound is not None and f.device_numa not in bound:
        out.append(
            AuditFinding(
                "memory_policy",
                "error",
                [f.rank],
                f.host,
                f"rank {f.rank} memory policy {f.memory_policy} excludes node {f.device_numa} "
                f"of its GPU {gpu}",
                f"Bind memory to the GPU's node: numactl --membind={f.device_numa} (or "
                "--localalloc together with the right --cpunodebind).",
                {**ev, "memory_policy": f.memory_policy},
            )
        )
    return out


def _affinity_overlaps(facts: list[RankFacts]) -> list[AuditFinding]:
    """Ranks of one host pinned to overlapping restricted CPU sets (they fight for CPUs)."""
    out: list[AuditFinding] = []
    by_host: dict[str, list[RankFacts]] = defaultdict(list)
    for f in facts:
        by_host[f.host].append(f)
    for host, fs in by_host.items():
        allcpus = set().union(*(set(f.cpu_affinity) for f in fs))
        pinned = [f for f in fs if set(f.cpu_affinity) != allcpus]
        for i, a in enumerate(pinned):
            for b in pinned[i + 1 :]:
                both = set(a.cpu_affinity) & set(b.cpu_affinity)
                if both and (a.device_local_cpus == [] or a.device_bdf != b.device_bdf):
                    out.append(
                        AuditFinding(
                            "cpu_overlap",
                            "warning",
                            [a.rank, b.rank],
                            host,
                            f"ranks {a.rank} and {b.rank} on {host} are pinned to shared CPUs "
                            f"{format_cpulist(both)}",
                            "Give each rank its own CPU set on its GPU's NUMA node.",
                            {"cpus": format_cpulist(both)},
                        )
                    )
    return out


def _level_rank(label: str) -> int:
    if label.startswith("NV"):
        return 0
    return LEVEL_ORDER.index(label) if label in LEVEL_ORDER else len(LEVEL_ORDER)


def _paths(f: RankFacts) -> list[AuditFinding]:
    out: list[AuditFinding] = []
    m = f.path_matrix
    n = len(m)
    asym = [
        (i, j, m[i][j], m[j][i]) for i in range(n) for j in range(i + 1, n) if m[i][j] != m[j][i]
    ]
    if asym:
        out.append(
            AuditFinding(
                "path_asymmetric",
                "error",
                [],
                f.host,
                f"GPU path matrix on {f.host} is not symmetric: "
                + "; ".join(f"GPU{i}->GPU{j} {a} but GPU{j}->GPU{i} {b}" for i, j, a, b in asym),
                "A link is down or misreported on one side: check `nvidia-smi topo -m` and "
                "`nvidia-smi nvlink -s`; reseat/replace the bridge or reset the GPUs.",
                {"matrix": m},
            )
        )
    labels = {m[i][j] for i in range(n) for j in range(n) if i != j}
    if (
        len({_level_rank(x) for x in labels}) > 1
        or len({x for x in labels if x.startswith("NV")}) > 1
    ):
        worst = max(labels, key=lambda x: (_level_rank(x), x))
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if m[i][j] == worst]
        out.append(
            AuditFinding(
                "path_uneven",
                "warning",
                [],
                f.host,
                f"GPU pairs on {f.host} take unequal paths ({', '.join(sorted(labels))}); "
                f"weakest {worst} between " + ", ".join(f"GPU{i}-GPU{j}" for i, j in pairs[:8]),
                "Place ranks that talk most (tensor/pipeline parallel groups) on GPUs joined by "
                "the best path, and benchmark with `gpubalance collectives` before concluding.",
                {"matrix": m},
            )
        )
    return out
