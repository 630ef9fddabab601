"""Collective benchmark inside an initialised torch.distributed job.

For each group (the world; with several hosts also each host's intra-node group and the
inter-node groups of ranks with the same local rank), each op of :data:`OPS` and each
message size: ``warmup`` untimed runs, then ``iters`` timed runs, each preceded by a barrier
so every rank starts together. Each rank records its own mean time; the op's time is the
slowest rank's mean (when the collective is complete everywhere), from which algbw/busbw
follow the nccl-tests definitions (:mod:`gpubalance.diagnose.bandwidth`). Per-rank times show
a rank that arrives late (its own time is the shortest: the others wait for it).

A point-to-point pass (``p2p=True``) sends ``p2p_bytes`` from every rank to rank+d for each
shift d concurrently, giving a send-bandwidth matrix that exposes a slow link.

Times are seconds; sizes bytes. On CUDA (NCCL) each timed run ends with a device
synchronisation.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from gpubalance.diagnose.bandwidth import OPS, algbw_bytes_s, bus_factor
from gpubalance.errors import UserInputError

__all__ = ["BenchConfig", "BenchResult", "CollRow", "run_collectives"]


@dataclass(frozen=True)
class BenchConfig:
    """What to measure."""

    sizes_bytes: tuple[int, ...] = (1 << 10, 1 << 16, 1 << 20, 1 << 22)
    ops: tuple[str, ...] = OPS
    iters: int = 20
    warmup: int = 5
    p2p: bool = True
    p2p_bytes: int = 1 << 20
    delay_rank: int = -1  # inject: this rank sleeps before every timed op (tests/demos)
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        for op in self.ops:
            bus_factor(op, 2)  # validates the name
        if self.iters < 1 or self.warmup < 0:
            raise UserInputError("iters must be >= 1 and warmup >= 0", field="iters")
        if not self.sizes_bytes or min(self.sizes_bytes) < 4:
            raise UserInputError("sizes must be at least 4 bytes", field="sizes")


@dataclass
class CollRow:
    """One (group, op, size) measurement."""

    group: str  # "world", "intra:<host>", "inter:local<i>"
    kind: str  # "world" / "intra" / "inter"
    op: str
    size_bytes: int
    n_ranks: int
    time_s: float
    algbw_bytes_s: float
    busbw_bytes_s: float
    rank_time_s: dict[str, float]
    late_rank: int | None = None


@dataclass
class BenchResult:
    """All rows, the p2p bandwidth matrix (row = sender) and the rank -> host map."""

    backend: str
    world_size: int
    hosts: dict[str, str]
    rows: list[CollRow]
    p2p_bytes: int
    p2p_bw_bytes_s: list[list[float]]
    findings: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _groups(dist: Any, hosts: list[str]) -> list[tuple[str, str, list[int]]]:
    """(label, kind, ranks) for every group; every rank must create all of them."""
    n = len(hosts)
    out = [("world", "world", list(range(n)))]
    uniq = sorted(set(hosts))
    if len(uniq) > 1:
        local_of = {}
        count: dict[str, int] = {}
        for r, h in enumerate(hosts):
            local_of[r] = count.get(h, 0)
            count[h] = local_of[r] + 1
        for h in uniq:
            ranks = [r for r in range(n) if hosts[r] == h]
            if len(ranks) > 1:
                out.append((f"intra:{h}", "intra", ranks))
        for li in sorted(set(local_of.values())):
            ranks = [r for r in range(n) if local_of[r] == li]
            if len(ranks) > 1:
                out.append((f"inter:local{li}", "inter", ranks))
    return out


def _op_call(dist: Any, op: str, buf: Any, out: Any, group: Any, src: int) -> None:
    if op == "all_reduce":
        dist.all_reduce(buf, group=group)
    elif op == "all_gather":
        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        fn(out, buf, group=group)
    elif op == "reduce_scatter":
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        fn(out, buf, group=group)
    else:
        dist.broadcast(buf, src=src, group=group)


def run_collectives(cfg: BenchConfig, host: str) -> BenchResult | None:
    """Run the benchmark on every rank of the initialised default group; rank 0 returns
    the result, the other ranks None."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    backend = str(dist.get_backend())
    cuda = backend == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    box: list[Any] = [None] * world
    dist.all_gather_object(box, host)
    hosts = [str(h) for h in box]
    groups = _groups(dist, hosts)
    handles = {}
    for label, _kind, ranks in groups:
        handles[label] = None if label == "world" else dist.new_group(ranks)

    mine: list[tuple[str, str, str, int, int, float]] = []
    for kind_now in ("world", "intra", "inter"):
        # groups of one kind have disjoint ranks and run at the same time; every rank
        # meets the others at one world barrier per kind, in or out of a group of it
        for label, kind, ranks in groups:
            if kind != kind_now or rank not in ranks:
                continue
            mine.extend(
                _bench_group(
                    dist, torch, cfg, label, kind, ranks, handles[label], rank, device, sync
                )
            )
        dist.barrier()

    p2p = [[0.0] * world for _ in range(world)]
    if cfg.p2p and world > 1:
        elems = max(cfg.p2p_bytes // 4, 1)
        sbuf = torch.ones(elems, device=device)
        rbuf = torch.empty(elems, device=device)
        for d in range(1, world):
            dst, src = (rank + d) % world, (rank - d) % world
            for _ in range(2):  # warm up this pair
                _exchange(dist, sbuf, rbuf, dst, src)
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(max(cfg.iters // 4, 2)):
                _exchange(dist, sbuf, rbuf, dst, src)
            sync()
            dt = (time.perf_counter() - t0) / max(cfg.iters // 4, 2)
            p2p[rank][dst] = algbw_bytes_s(elems * 4, dt)
    rows_box: list[Any] = [None] * world
    dist.all_gather_object(rows_box, {"rows": mine, "p2p": p2p[rank]})
    if rank != 0:
        return None
    return _assemble(backend, hosts, rows_box, cfg, world)


def _bench_group(
    dist: Any,
    torch: Any,
    cfg: BenchConfig,
    label: str,
    kind: str,
    ranks: list[int],
    g: Any,
    rank: int,
    device: Any,
    sync: Any,
) -> list[tuple[str, str, str, int, int, float]]:
    out = []
    n = len(ranks)
    for op in cfg.ops:
        for size in cfg.sizes_bytes:
            elems = max(size // 4 // n * n, n)
            size_b = elems * 4
            if op == "all_gather":
                buf = torch.ones(elems // n, device=device)
                res = torch.empty(elems, device=device)
            elif op == "reduce_scatter":
                buf = torch.ones(elems, device=device)
                res = torch.empty(elems // n, device=device)
            else:
                buf = torch.ones(elems, device=device)
                res = buf
            for _ in range(cfg.warmup):
                _op_call(dist, op, buf, res, g, ranks[0])
            sync()
            total = 0.0
            for _ in range(cfg.iters):
                dist.barrier(group=g)
                if rank == cfg.delay_rank and cfg.delay_s > 0:
                    time.sleep(cfg.delay_s)
                t0 = time.perf_counter()
                _op_call(dist, op, buf, res, g, ranks[0])
                sync()
                total += time.perf_counter() - t0
            out.append((label, kind, op, size_b, n, total / cfg.iters))
    return out


def _exchange(dist: Any, sbuf: Any, rbuf: Any, dst: int, src: int) -> None:
    reqs = [dist.isend(sbuf, dst), dist.irecv(rbuf, src)]
    for r in reqs:
        r.wait()


def _assemble(
    backend: str, hosts: list[str], boxes: list[Any], cfg: BenchConfig, world: int
) -> BenchResult:
    per: dict[tuple[str, str, str, int, int], dict[str, float]] = {}
    for r, b in enumerate(boxes):
        for label, kind, op, size_b, n, t in b["rows"]:
            per.setdefault((label, kind, op, size_b, n), {})[str(r)] = t
    rows: list[CollRow] = []
    for (label, kind, op, size_b, n), times in per.items():
        t = max(times.values())
        alg = algbw_bytes_s(size_b, t)
        fastest = min(times, key=lambda k: times[k])
        others = [v for k, v in times.items() if k != fastest]
        # a late arrival: its own time is short because the others spent theirs waiting
        late = None
        if others and min(others) > 2.0 * times[fastest] and min(others) - times[fastest] > 1e-3:
            late = int(fastest)
        rows.append(
            CollRow(
                group=label,
                kind=kind,
                op=op,
                size_bytes=size_b,
                n_ranks=n,
                time_s=t,
                algbw_bytes_s=alg,
                busbw_bytes_s=alg * bus_factor(op, n),
                rank_time_s=times,
                late_rank=late,
            )
        )
    p2p = [list(b["p2p"]) for b in boxes]
    res = BenchResult(
        backend=backend,
        world_size=world,
        hosts={str(r): h for r, h in enumerate(hosts)},
        rows=rows,
        p2p_bytes=cfg.p2p_bytes,
        p2p_bw_bytes_s=p2p,
    )
    res.findings = _findings(res)
    return res


def _findings(res: BenchResult) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    late = [r.late_rank for r in res.rows if r.late_rank is not None]
    if late:
        top = max(set(late), key=late.count)
        if late.count(top) * 2 >= len(res.rows):
            out.append(
                {
                    "check": "late_rank",
                    "rank": top,
                    "host": res.hosts[str(top)],
                    "message": f"rank {top} arrives late at {late.count(top)} of "
                    f"{len(res.rows)} measurements; the other ranks wait for it",
                    "fix": "Find what delays this rank before collectives (`gpubalance "
                    "diagnose` on a traced run; its CPU placement with `gpubalance audit`).",
                }
            )
    n = res.world_size
    if n > 2 and any(any(v > 0 for v in row) for row in res.p2p_bw_bytes_s):
        import numpy as np

        m = np.array(res.p2p_bw_bytes_s, dtype=float)
        off = ~np.eye(n, dtype=bool)
        med = float(np.median(m[off]))
        for r in range(n):
            send = float(np.median(m[r, off[r]]))
            recv = float(np.median(m[off[:, r], r]))
            if med > 0 and min(send, recv) < 0.5 * med:
                out.append(
                    {
                        "check": "slow_link",
                        "rank": r,
                        "host": res.hosts[str(r)],
                        "message": f"rank {r}: point-to-point {min(send, recv) / 1e9:.3f} GB/s "
                        f"vs {med / 1e9:.3f} GB/s median",
                        "fix": "Check this rank's NIC/NVLink/PCIe path (`gpubalance audit` for "
                        "the path matrix, NCCL_* env and NUMA placement).",
                    }
                )
    intra = [r for r in res.rows if r.kind == "intra"]
    inter = [r for r in res.rows if r.kind == "inter"]
    if intra and inter:
        big = max(r.size_bytes for r in intra)
        bi = max(r.busbw_bytes_s for r in intra if r.size_bytes == big)
        be = max((r.busbw_bytes_s for r in inter if r.size_bytes == big), default=0.0)
        out.append(
            {
                "check": "intra_vs_inter",
                "rank": None,
                "host": None,
                "message": f"at {big} B: intra-node busbw {bi / 1e9:.3f} GB/s, inter-node "
                f"{be / 1e9:.3f} GB/s",
                "fix": "Keep the chattiest groups (tensor parallel) inside a node; "
                "tune inter-node NCCL settings against this figure.",
            }
        )
    return out
