"""``gpubalance audit``: launch and placement audit across ranks (or of this node)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def audit(
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    nproc: int = typer.Option(
        0, "--nproc", help="Launch this many local ranks (like torchrun) and audit them."
    ),
    gpu_pci: str | None = typer.Option(
        None,
        "--gpu-pci",
        help="Comma-separated PCI addresses of the visible GPUs in device order (rank uses "
        "entry LOCAL_RANK); default: ask CUDA/NVML.",
    ),
    sysfs_root: Path = typer.Option(
        Path("/"), "--sysfs-root", help="Read sys/bus/pci/... under this directory."
    ),
    out: Path | None = typer.Option(None, "--out", help="Also write the JSON report here."),
) -> None:
    """Audit the launch: one process per GPU, device order, env vars, versions, CPU/NUMA.

    Checks env vars and versions identical across ranks, each rank's CPU affinity and
    memory policy against its GPU's NUMA node, and the GPU path matrix.

    Inside torchrun every rank gathers its facts to rank 0, which prints the report.
    Exit code 1 when an error-level mismatch is found, 0 otherwise.
    """
    import orjson
    from rich.console import Console

    from gpubalance.diagnose.audit import AuditReport
    from gpubalance.diagnose.audit_run import run_audit
    from gpubalance.errors import UserInputError
    from gpubalance.report.audit import print_audit

    pci = [p.strip() for p in gpu_pci.split(",") if p.strip()] if gpu_pci else None
    if not sysfs_root.is_dir():
        raise UserInputError("not a directory", field="sysfs-root", file=sysfs_root)
    if nproc < 0:
        raise UserInputError("must be >= 0", field="nproc")
    if nproc:
        doc = _launch(nproc, gpu_pci, sysfs_root)
        report = None
    else:
        report = run_audit(gpu_pci=pci, sysfs_root=sysfs_root)
        if report is None:  # not rank 0 of a distributed launch
            return
        doc = report.to_dict()
    if out is not None:
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        tmp.replace(out)
    if json_out:
        typer.echo(orjson.dumps(doc).decode())
    elif report is not None:
        print_audit(Console(), report)
    else:
        print_audit(Console(), AuditReport.from_dict(doc))
    if any(f["severity"] == "error" for f in doc["findings"]):
        raise typer.Exit(1)


def _launch(nproc: int, gpu_pci: str | None, sysfs_root: Path) -> dict[str, Any]:
    import orjson

    from gpubalance.diagnose.launch import launch_local
    from gpubalance.errors import UserInputError

    args = ["audit", "--json", "--sysfs-root", str(sysfs_root)]
    if gpu_pci:
        args += ["--gpu-pci", gpu_pci]
    res = launch_local("gpubalance.cli.main", args, nproc, timeout_s=180)
    first = res[0]
    try:
        doc = orjson.loads(first.stdout.strip().splitlines()[-1])
    except (IndexError, orjson.JSONDecodeError) as exc:
        tail = "; ".join(f"rank {r.rank}: {r.stderr.strip()[-300:]}" for r in res if r.stderr)
        raise UserInputError(f"local audit workers failed: {tail}") from exc
    assert isinstance(doc, dict)
    return doc
