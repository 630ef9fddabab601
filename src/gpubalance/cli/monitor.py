"""``gpubalance monitor``: live GPU telemetry from NVML."""

from __future__ import annotations

from pathlib import Path

import typer


def monitor(
    interval: float = typer.Option(1.0, "--interval", help="Seconds between samples."),
    count: int = typer.Option(0, "--count", help="Stop after this many rounds (0: until ^C)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON line per GPU sample."),
    out: Path | None = typer.Option(None, "--out", help="Append samples to this JSONL file."),
) -> None:
    """Show per-GPU utilisation, memory, PCIe TX/RX, SM clock, power and temperature.

    Where NVML is absent (no NVIDIA driver, or nvidia-ml-py not installed) it says why and
    exits with code 1: there is nothing to show.
    """
    import orjson
    from rich.console import Console
    from rich.live import Live

    from gpubalance.diagnose.monitor import sample_loop
    from gpubalance.diagnose.nvml import Nvml, NvmlUnavailable
    from gpubalance.errors import UserInputError
    from gpubalance.report.monitor import samples_table

    if interval <= 0 or count < 0:
        raise UserInputError("interval must be > 0 and count >= 0", field="interval")
    err = Console(stderr=True)
    try:
        nv = Nvml.open()
    except NvmlUnavailable as exc:
        err.print(
            f"monitor: {exc}; no GPU telemetry to show.",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(1) from exc
    fh = open(out, "ab") if out is not None else None  # noqa: SIM115 - closed below
    try:
        if nv.count == 0:
            err.print("monitor: NVML sees no GPU; nothing to show.")
            raise typer.Exit(1)
        if json_out:
            for samples, _errors in sample_loop(nv, interval, count):
                for s in samples:
                    line = orjson.dumps(s.to_dict())
                    typer.echo(line.decode())
                    if fh is not None:
                        fh.write(line + b"\n")
            return
        with Live(console=Console(), auto_refresh=False) as live:
            for samples, errors in sample_loop(nv, interval, count):
                live.update(samples_table(samples, errors), refresh=True)
                if fh is not None:
                    fh.write(b"".join(orjson.dumps(s.to_dict()) + b"\n" for s in samples))
                    fh.flush()
    except KeyboardInterrupt:
        pass
    finally:
        if fh is not None:
            fh.close()
        nv.close()
