"""Launch N local worker processes the way torchrun does (RANK, WORLD_SIZE, MASTER_*).

Used by ``gpubalance collectives --nproc N`` / ``audit --nproc N`` and by the injected-scenario
tests. Each worker is ``python -m <module> <args>``; per-rank environment overrides and CPU
affinity can be given (for tests that inject a misconfigured rank).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpubalance.errors import UserInputError

__all__ = ["WorkerResult", "free_port", "launch_local"]


@dataclass
class WorkerResult:
    """Exit code and output of one worker."""

    rank: int
    returncode: int
    stdout: str
    stderr: str


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_local(
    module: str,
    args: Sequence[str],
    nproc: int,
    *,
    env_per_rank: Sequence[dict[str, str | None]] | None = None,
    affinity_per_rank: Sequence[set[int] | None] | None = None,
    timeout_s: float = 300.0,
    nnodes_hosts: Sequence[str] | None = None,
) -> list[WorkerResult]:
    """Run ``nproc`` workers of ``python -m module args`` and wait for all of them.

    A ``module`` ending in ``.py`` is run as a script path instead.

    ``env_per_rank[r]`` maps names to values (None removes the variable);
    ``affinity_per_rank[r]`` pins rank ``r`` to a CPU set before it starts;
    ``nnodes_hosts[r]`` sets GPUBALANCE_HOST to emulate ranks on different hosts.
    A worker that outlives ``timeout_s`` is killed and reported with return code -9.
    """
    if nproc < 1:
        raise UserInputError("nproc must be at least 1", field="nproc")
    for attempt in range(3):
        results = _launch_once(
            module, args, nproc, env_per_rank, affinity_per_rank, timeout_s, nnodes_hosts
        )
        # the rendezvous port was free when picked but taken before rank 0 bound it: retry
        if attempt < 2 and any(
            r.returncode != 0
            and ("EADDRINUSE" in r.stderr or "address already in use" in r.stderr.lower())
            for r in results
        ):
            continue
        break
    return results


def _launch_once(
    module: str,
    args: Sequence[str],
    nproc: int,
    env_per_rank: Sequence[dict[str, str | None]] | None,
    affinity_per_rank: Sequence[set[int] | None] | None,
    timeout_s: float,
    nnodes_hosts: Sequence[str] | None,
) -> list[WorkerResult]:
    port = free_port()
    procs: list[subprocess.Popen[str]] = []
    for rank in range(nproc):
        env = dict(os.environ)
        env.update(
            {
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(nproc),
                "LOCAL_WORLD_SIZE": str(nproc),
                "GROUP_RANK": "0",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            }
        )
        if nnodes_hosts is not None:
            env["GPUBALANCE_HOST"] = nnodes_hosts[rank]
        if env_per_rank is not None:
            for k, v in env_per_rank[rank].items():
                if v is None:
                    env.pop(k, None)
                else:
                    env[k] = v
        cpus = affinity_per_rank[rank] if affinity_per_rank is not None else None

        def _pin(cpus: set[int] | None = cpus) -> None:
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        procs.append(
            subprocess.Popen(
                [sys.executable, *([module] if module.endswith(".py") else ["-m", module]), *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=_pin if cpus is not None else None,
            )
        )
    deadline = time.monotonic() + timeout_s
    results: list[WorkerResult] = []
    for rank, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=max(deadline - time.monotonic(), 0.1))
            results.append(WorkerResult(rank, p.returncode, out, err))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.kill()
            out, err = p.communicate()
            results.append(WorkerResult(rank, -9, out, err + "\n(killed: timeout)"))
    return results
