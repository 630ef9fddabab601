"""Host placement facts from Linux: CPU lists, a GPU's NUMA node from sysfs, memory policy.

``sysfs_root`` lets a test (or an offline check of another machine's files) point at a
directory laid out like ``/``: ``<root>/sys/bus/pci/devices/<bdf>/numa_node`` and
``local_cpulist``, ``<root>/sys/devices/system/node/online``.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpubalance.errors import UserInputError

__all__ = [
    "format_cpulist",
    "gpu_numa",
    "memory_policy",
    "mems_allowed",
    "online_numa_nodes",
    "parse_cpulist",
]


def parse_cpulist(text: str) -> set[int]:
    """Linux list format ``'0-3,8,10-11'`` -> ``{0,1,2,3,8,10,11}`` (empty text -> empty set)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, _, hi = part.partition("-")
            try:
                a, b = int(lo), int(hi)
            except ValueError as exc:
                raise UserInputError(f"bad CPU list {text!r}") from exc
            if b < a:
                raise UserInputError(f"bad CPU list {text!r}")
            out.update(range(a, b + 1))
        else:
            try:
                out.add(int(part))
            except ValueError as exc:
                raise UserInputError(f"bad CPU list {text!r}") from exc
    return out


def format_cpulist(cpus: set[int] | list[int]) -> str:
    """``{0,1,2,3,8}`` -> ``'0-3,8'``."""
    vals = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(parts)


def gpu_numa(bdf: str, sysfs_root: str | Path = "/") -> tuple[int, set[int]] | None:
    """(NUMA node, local CPUs) of the PCI device ``bdf``; None when sysfs does not say.

    A node of -1 (single-node machines) is returned as -1.
    """
    dev = Path(sysfs_root) / "sys" / "bus" / "pci" / "devices" / bdf
    try:
        node = int((dev / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cpus = parse_cpulist((dev / "local_cpulist").read_text())
    except (OSError, UserInputError):
        cpus = set()
    return node, cpus


def online_numa_nodes(sysfs_root: str | Path = "/") -> set[int]:
    """NUMA nodes online (``/sys/devices/system/node/online``); falls back to the real
    machine's file when the given root has none, and to ``{0}``."""
    for root in (Path(sysfs_root), Path("/")):
        try:
            return parse_cpulist((root / "sys/devices/system/node/online").read_text())
        except (OSError, UserInputError):
            continue
    return {0}


def mems_allowed(status_text: str | None = None) -> set[int]:
    """NUMA nodes this process may allocate on (``Mems_allowed_list`` of /proc/self/status)."""
    if status_text is None:
        try:
            status_text = Path("/proc/self/status").read_text()
        except OSError:
            return set()
    for line in status_text.splitlines():
        if line.startswith("Mems_allowed_list:"):
            return parse_cpulist(line.split(":", 1)[1])
    return set()


def memory_policy(numa_maps_text: str | None = None) -> str:
    """The process's memory policy as /proc/self/numa_maps shows it for its heap:
    ``default``, ``bind:<nodes>``, ``interleave:<nodes>``, ``prefer:<node>`` (or ``unknown``).
    """
    if numa_maps_text is None:
        try:
            with open("/proc/self/numa_maps") as fh:
                numa_maps_text = fh.read(1 << 20)
        except OSError:
            return "unknown"
    first = None
    for line in numa_maps_text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if first is None:
            first = parts[1]
        if "heap" in parts[2:]:
            return parts[1]
    return first or "unknown"


def policy_nodes(policy: str) -> set[int] | None:
    """Nodes named by a policy string (None for ``default``/``local``/unknown)."""
    if ":" not in policy:
        return None
    spec = policy.split(":", 1)[1]
    if "=" in spec:  # e.g. 'bind=static:0-1'
        spec = spec.split(":", 1)[-1]
    try:
        return parse_cpulist(spec)
    except UserInputError:
        return None


def cpu_affinity() -> set[int]:
    """CPUs this process may run on (``os.sched_getaffinity``)."""
    return set(os.sched_getaffinity(0))
