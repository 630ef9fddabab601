"""NVML telemetry (nvidia-ml-py, imported as ``pynvml``): devices, GPU path matrix, samples.

:meth:`Nvml.open` returns a session or raises :class:`NvmlUnavailable` with the reason
(library not installed, driver absent, ...), so callers can say so and carry on. The NVML
module can be passed in (``module=``) — tests use that to stand in for a GPU machine.

Sampled per GPU: utilisation (%), memory used/total (bytes), PCIe TX/RX throughput
(bytes/s; NVML reports KB/s over a 20 ms window), SM clock (MHz), power (W), temperature (°C).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "GpuInfo",
    "GpuSample",
    "Nvml",
    "NvmlSampler",
    "NvmlUnavailable",
    "normalize_bdf",
    "nvml_file_name",
    "visible_nvml_indices",
]

_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# path quality, best first (NV# links rank above all PCIe levels)
LEVEL_ORDER = ("NV", "X", "PIX", "PXB", "PHB", "NODE", "SYS")


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here; the message says why."""


def normalize_bdf(bus_id: str | bytes) -> str:
    """``'00000000:3B:00.0'`` -> ``'0000:3b:00.0'`` (the sysfs spelling)."""
    s = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    s = s.strip().lower()
    parts = s.split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
        return ":".join(parts)
    if len(parts) == 2:
        return "0000:" + s
    return s


def nvml_file_name(rank: int) -> str:
    """Name of a rank's NVML sample file beside its trace."""
    return f"nvml-rank{rank:05d}.jsonl"


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML sees it (``index`` is NVML's, i.e. PCI bus order)."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    memory_total_bytes: int


@dataclass
class GpuSample:
    """One telemetry sample of one GPU (``time_s`` unix seconds)."""

    time_s: float
    rank: int
    index: int
    uuid: str
    util_gpu_pct: float
    util_mem_pct: float
    mem_used_bytes: int
    mem_total_bytes: int
    pcie_tx_bytes_s: float
    pcie_rx_bytes_s: float
    sm_clock_mhz: float
    power_w: float
    temperature_c: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Nvml:
    """An initialised NVML session; :meth:`close` shuts it down."""

    def __init__(self, module: Any) -> None:
        self.m = module
        self._handles: list[Any] = []

    @classmethod
    def open(cls, module: Any | None = None) -> Nvml:
        """Initialise NVML; raises :class:`NvmlUnavailable` with the reason."""
        if module is None:
            try:
                import pynvml
            except ImportError as exc:
                raise NvmlUnavailable(
                    "nvidia-ml-py is not installed (pip install 'gpubalance[nvml]')"
                ) from exc
            module = pynvml
        assert module is not None
        try:
            module.nvmlInit()
        except Exception as exc:  # pynvml.NVMLError and subclasses, OSError
            raise NvmlUnavailable(f"NVML is not available here: {exc}") from exc
        s = cls(module)
        try:
            n = int(module.nvmlDeviceGetCount())
            s._handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        except Exception as exc:
            s.close()
            raise NvmlUnavailable(f"NVML could not list devices: {exc}") from exc
        return s

    def close(self) -> None:
        # shutting down a session that may be half open: nothing useful to report
        with contextlib.suppress(Exception):
            self.m.nvmlShutdown()

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def count(self) -> int:
        return len(self._handles)

    def driver_version(self) -> str:
        return _text(self.m.nvmlSystemGetDriverVersion())

    def cuda_driver_version(self) -> str:
        v = int(self.m.nvmlSystemGetCudaDriverVersion())
        return f"{v // 1000}.{(v % 1000) // 10}"

    def devices(self) -> list[GpuInfo]:
        out = []
        for i, h in enumerate(self._handles):
            pci = self.m.nvmlDeviceGetPciInfo(h)
            mem = self.m.nvmlDeviceGetMemoryInfo(h)
            out.append(
                GpuInfo(
                    index=i,
                    uuid=_text(self.m.nvmlDeviceGetUUID(h)),
                    name=_text(self.m.nvmlDeviceGetName(h)),
                    pci_bus_id=normalize_bdf(pci.busId),
                    memory_total_bytes=int(mem.total),
                )
            )
        return out

    def _nvlinks(self, i: int, j_bdf: str) -> int:
        links = 0
        h = self._handles[i]
        for link in range(int(getattr(self.m, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                if int(self.m.nvmlDeviceGetNvLinkState(h, link)) != 1:
                    continue
                remote = self.m.nvmlDeviceGetNvLinkRemotePciInfo(h, link)
            except Exception:  # link not supported / not present
                continue
            if normalize_bdf(remote.busId) == j_bdf:
                links += 1
        return links

    def path_matrix(self) -> list[list[str]]:
        """``m[i][j]``: path label from GPU i to GPU j, as ``nvidia-smi topo -m`` spells it
        (``X`` on the diagonal, ``NV<n>`` for n NVLinks, else PIX/PXB/PHB/NODE/SYS).
        Computed from each side separately, so an asymmetric result is visible."""
        devs = self.devices()
        n = len(devs)
        m = [["X"] * n for _ in range(n)]
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                nv = self._nvlinks(i, devs[j].pci_bus_id)
                if nv:
                    m[i][j] = f"NV{nv}"
                    continue
                try:
                    lvl = int(
                        self.m.nvmlDeviceGetTopologyCommonAncestor(
                            self._handles[i], self._handles[j]
                        )
                    )
                    m[i][j] = _LEVELS.get(lvl, f"L{lvl}")
                except Exception:
                    m[i][j] = "?"
        return m

    def sample(self, index: int, rank: int = -1, uuid: str | None = None) -> GpuSample:
        """One telemetry sample of GPU ``index``."""
        m, h = self.m, self._handles[index]
        util = m.nvmlDeviceGetUtilizationRates(h)
        mem = m.nvmlDeviceGetMemoryInfo(h)
        tx = float(m.nvmlDeviceGetPcieThroughput(h, m.NVML_PCIE_UTIL_TX_BYTES)) * 1024.0
        rx = float(m.nvmlDeviceGetPcieThroughput(h, m.NVML_PCIE_UTIL_RX_BYTES)) * 1024.0
        return GpuSample(
            time_s=time.time(),
            rank=rank,
            index=index,
            uuid=uuid if uuid is not None else _text(m.nvmlDeviceGetUUID(h)),
            util_gpu_pct=float(util.gpu),
            util_mem_pct=float(util.memory),
            mem_used_bytes=int(mem.used),
            mem_total_bytes=int(mem.total),
            pcie_tx_bytes_s=tx,
            pcie_rx_bytes_s=rx,
            sm_clock_mhz=float(m.nvmlDeviceGetClockInfo(h, m.NVML_CLOCK_SM)),
            power_w=float(m.nvmlDeviceGetPowerUsage(h)) / 1000.0,
            temperature_c=float(m.nvmlDeviceGetTemperature(h, m.NVML_TEMPERATURE_GPU)),
        )


class NvmlSampler:
    """Samples GPUs every ``interval_s`` in a background thread into a JSONL file.

    Nothing starts in the constructor; :meth:`start` opens NVML (raising
    :class:`NvmlUnavailable` when it cannot) and the thread; :meth:`stop` joins it.
    Each line is one :class:`GpuSample` labelled with ``rank`` and the GPU's UUID.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        interval_s: float = 1.0,
        rank: int = -1,
        indices: list[int] | None = None,
        module: Any | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.path = Path(path)
        self.interval_s = interval_s
        self.rank = rank
        self.indices = indices
        self._module = module
        self._nvml: Nvml | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples_written = 0
        self.errors: list[str] = []

    def start(self) -> NvmlSampler:
        self._nvml = Nvml.open(self._module)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gpubalance-nvml", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None

    def _loop(self) -> None:
        assert self._nvml is not None
        nv = self._nvml
        idx = self.indices if self.indices is not None else list(range(nv.count))
        uuids = {d.index: d.uuid for d in nv.devices()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as fh:
            while True:
                for i in idx:
                    try:
                        s = nv.sample(i, rank=self.rank, uuid=uuids.get(i))
                    except Exception as exc:  # a counter this GPU lacks: note it, go on
                        if len(self.errors) < 10:
                            self.errors.append(f"GPU {i}: {exc}")
                        continue
                    fh.write(orjson.dumps(s.to_dict()) + b"\n")
                    self.samples_written += 1
                fh.flush()
                if self._stop.wait(self.interval_s):
                    break


def visible_nvml_indices(devices: list[GpuInfo]) -> list[int]:
    """NVML indices of the GPUs this process sees, in CUDA order, from CUDA_VISIBLE_DEVICES
    (integers are taken as NVML/PCI order, which matches CUDA only with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; ``GPU-...`` entries are matched by UUID prefix)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return [d.index for d in devices]
    out: list[int] = []
    for tok in (t.strip() for t in cvd.split(",")):
        if not tok:
            continue
        if tok.isdigit():
            if int(tok) < len(devices):
                out.append(int(tok))
            else:
                break
        else:
            match = [d.index for d in devices if d.uuid.startswith(tok)]
            if not match:
                break
            out.append(match[0])
    return out
