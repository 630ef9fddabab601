"""Per-rank phase tracer for training and batch-inference loops.

Usage::

    tracer = PhaseTracer("traces/run1")          # nothing opened yet
    with tracer:                                 # start(): opens the file, starts flushing
        for batch in tracer.timed(loader):       # DataLoader wait -> phase "data"
            with tracer.step(work=batch_tokens):
                with tracer.phase("compute", gpu=True):
                    loss = model(batch); loss.backward()
                tracer.dist.all_reduce(grad)     # timed collective, phase "sync"

The hot path only reads a monotonic clock and appends a tuple to a list; a background thread
(or, with ``background=False``, every ``flush_every_steps`` steps) turns the list into
fixed-size records (:mod:`gpubalance.diagnose.format`) and appends them to the rank's file.
CUDA events are recorded without synchronising and resolved a few steps later
(``cuda_lag_steps``), once ``Event.query()`` says they completed.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from gpubalance.diagnose.format import (
    FORMAT_VERSION,
    KIND_COLL,
    KIND_GPU,
    KIND_PHASE,
    KIND_STEP,
    KIND_WORK,
    RECORD_DTYPE,
    category_of,
    encode_header,
    name_record,
    trace_file_name,
)
from gpubalance.errors import UserInputError

__all__ = ["PhaseTracer", "default_host", "default_rank_world"]

_perf_ns = time.perf_counter_ns


def default_host() -> str:
    """Host label of this process: ``GPUBALANCE_HOST`` if set, else the hostname."""
    return os.environ.get("GPUBALANCE_HOST") or socket.gethostname()


def default_rank_world() -> tuple[int, int]:
    """(rank, world size) from torch.distributed when initialised, else RANK/WORLD_SIZE env."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:  # pragma: no cover - torch is optional
        pass
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


class _Span:
    """A timed region; ``__exit__`` appends one record. Cheap: two clock reads, one append."""

    __slots__ = ("_cuda", "_kind", "_name_id", "_step", "_t0", "_tracer", "_value")

    def __init__(
        self, tracer: PhaseTracer, name_id: int, kind: int, value: float, cuda: bool
    ) -> None:
        self._tracer = tracer
        self._name_id = name_id
        self._kind = kind
        self._value = value
        self._cuda = cuda
        self._step = 0
        self._t0 = 0

    def __enter__(self) -> _Span:
        tr = self._tracer
        self._step = tr._step
        tr._depth += 1
        if self._cuda:
            tr._cuda_begin()
        self._t0 = _perf_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        t1 = _perf_ns()
        tr = self._tracer
        tr._depth -= 1
        tr._buf.append(
            (
                self._step,
                self._name_id,
                self._kind,
                tr._depth,
                self._t0 - tr._base_ns,
                t1 - self._t0,
                self._value,
            )
        )
        if self._cuda:
            tr._cuda_end(self._step, self._name_id)


class _StepSpan:
    __slots__ = ("_t0", "_tracer", "_work")

    def __init__(self, tracer: PhaseTracer, work: float | None) -> None:
        self._tracer = tracer
        self._work = work
        self._t0 = 0

    def __enter__(self) -> _StepSpan:
        tr = self._tracer
        if tr._in_step:
            raise RuntimeError("PhaseTracer.step() cannot be nested")
        tr._in_step = True
        tr._depth += 1
        self._t0 = _perf_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        t1 = _perf_ns()
        tr = self._tracer
        step = tr._step
        tr._depth -= 1
        tr._in_step = False
        buf = tr._buf
        buf.append((step, 0, KIND_STEP, 0, self._t0 - tr._base_ns, t1 - self._t0, 0.0))
        if self._work is not None:
            buf.append((step, 0, KIND_WORK, 0, 0, 0, float(self._work)))
        tr._step = step + 1
        if tr._cuda_pending:
            tr._cuda_resolve(force=False)
        if not tr._background and tr._step % tr.flush_every_steps == 0:
            tr.flush()


class _TimedDist:
    """torch.distributed calls timed as collectives (``tracer.dist.all_reduce(t)``)."""

    def __init__(self, tracer: PhaseTracer) -> None:
        self._tracer = tracer

    def _run(self, name: str, nbytes: int, fn: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        with self._tracer.collective(name, nbytes):
            return fn(*a, **kw)

    def all_reduce(self, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        import torch.distributed as dist

        return self._run("all_reduce", _nbytes(tensor), dist.all_reduce, tensor, *args, **kwargs)

    def all_gather_into_tensor(self, out: Any, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        import torch.distributed as dist

        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return self._run("all_gather", _nbytes(out), fn, out, tensor, *args, **kwargs)

    def all_gather(self, tensor_list: list[Any], tensor: Any, *args: Any, **kwargs: Any) -> Any:
        import torch.distributed as dist

        nbytes = sum(_nbytes(t) for t in tensor_list)
        fn = dist.all_gather
        return self._run("all_gather", nbytes, fn, tensor_list, tensor, *args, **kwargs)

    def reduce_scatter_tensor(self, out: Any, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        import torch.distributed as dist

        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return self._run("reduce_scatter", _nbytes(tensor), fn, out, tensor, *args, **kwargs)

    def broadcast(self, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        import torch.distributed as dist

        return self._run("broadcast", _nbytes(tensor), dist.broadcast, tensor, *args, **kwargs)

    def barrier(self, *args: Any, **kwargs: Any) -> Any:
        import torch.distributed as dist

        return self._run("barrier", 0, dist.barrier, *args, **kwargs)


def _nbytes(tensor: Any) -> int:
    return int(tensor.numel()) * int(tensor.element_size())


class PhaseTracer:
    """Records per-rank step and phase times to ``<out_dir>/rankNNNNN.gpbt``.

    Nothing happens in the constructor; :meth:`start` (or ``with tracer:``) opens the file
    and, with ``background=True``, starts the flush thread; :meth:`close` flushes the rest,
    resolves outstanding CUDA events (this one call synchronises) and closes the file.

    Args:
        out_dir: directory for the per-rank files (created on start).
        rank / world_size: default from torch.distributed, else RANK / WORLD_SIZE.
        run_id: identifies the run in every rank's header; default GPUBALANCE_RUN_ID,
            TORCHELASTIC_RUN_ID, or (when torch.distributed is initialised) rank 0's random
            id broadcast at start, else a random id.
        host: host label (default :func:`default_host`).
        background: flush from a background thread every ``flush_interval_s`` seconds;
            when False, flush inline every ``flush_every_steps`` steps.
        cuda_events: time ``phase(..., gpu=True)`` with CUDA events (default: when CUDA is
            available); ignored without CUDA.
        cuda_lag_steps: resolve CUDA events at the earliest this many steps later.
        nvml_interval_s: when set, sample this rank's GPU with NVML every so many seconds
            into ``<out_dir>/nvml-rankNNNNN.jsonl`` (utilisation, memory, PCIe, SM clock,
            power). Where NVML is absent the tracer says so (``notes``, a warning) and
            traces on without it.
        nvml_module: an NVML module to use instead of ``pynvml`` (tests).
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        run_id: str | None = None,
        host: str | None = None,
        background: bool = True,
        flush_interval_s: float = 1.0,
        flush_every_steps: int = 200,
        cuda_events: bool | None = None,
        cuda_lag_steps: int = 3,
        nvml_interval_s: float | None = None,
        nvml_module: Any | None = None,
    ) -> None:
        if flush_every_steps < 1 or flush_interval_s <= 0 or cuda_lag_steps < 0:
            raise UserInputError("flush_every_steps, flush_interval_s must be positive")
        self.out_dir = Path(out_dir)
        self._rank_arg = rank
        self._world_arg = world_size
        self._run_id_arg = run_id
        self._host_arg = host
        self._background = background
        self.flush_interval_s = flush_interval_s
        self.flush_every_steps = flush_every_steps
        self._cuda_arg = cuda_events
        self.cuda_lag_steps = cuda_lag_steps
        # state (set up by start)
        self.rank = -1
        self.world_size = 0
        self.run_id = ""
        self.host = ""
        self.path: Path | None = None
        # appended by the hot path (and DDP hook callbacks), drained by flush(): a deque, so
        # that append and popleft are atomic and no record is lost to a swap race
        self._buf: deque[tuple[Any, ...]] = deque()
        self._names: dict[tuple[str, int], int] = {}
        self._step = 0
        self._depth = 0
        self._in_step = False
        self._base_ns = 0
        self._fh: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cuda = False
        self._cuda_stack: list[Any] = []
        self._cuda_pending: list[tuple[int, int, Any, Any]] = []
        self._event_pool: list[Any] = []
        self.nvml_interval_s = nvml_interval_s
        self._nvml_module = nvml_module
        self._sampler: Any = None
        self.notes: list[str] = []
        self.dist = _TimedDist(self)

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> PhaseTracer:
        """Open (or append to) this rank's file and start flushing. Returns self."""
        if self._fh is not None:
            return self
        rank, world = default_rank_world()
        self.rank = rank if self._rank_arg is None else self._rank_arg
        self.world_size = world if self._world_arg is None else self._world_arg
        self.host = self._host_arg or default_host()
        self.run_id = self._resolve_run_id()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / trace_file_name(self.rank)
        if self.path.exists() and self.path.stat().st_size > 0:
            self._resume(self.path)
            self._fh = open(self.path, "ab")  # noqa: SIM115 - closed in close()
        else:
            self._base_ns = _perf_ns()
            header = {
                "format": "gpubalance-trace",
                "version": FORMAT_VERSION,
                "run_id": self.run_id,
                "rank": self.rank,
                "world_size": self.world_size,
                "host": self.host,
                "pid": os.getpid(),
                "local_rank": int(os.environ.get("LOCAL_RANK", "-1")),
                "start_unix_ns": time.time_ns(),
            }
            self._fh = open(self.path, "wb")  # noqa: SIM115 - closed in close()
            self._fh.write(encode_header(header))
            self._fh.flush()
        self._cuda = self._want_cuda()
        if self.nvml_interval_s:
            self._start_nvml(self.nvml_interval_s)
        if self._background:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._flush_loop, name=f"gpubalance-tracer-{self.rank}", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Resolve pending CUDA events, flush everything and close the file."""
        if self._fh is None:
            return
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        if self._cuda_pending:
            self._cuda_resolve(force=True)
        self.flush()
        self._fh.close()
        self._fh = None

    def __enter__(self) -> PhaseTracer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------------- hot path
    def step(self, work: float | None = None) -> _StepSpan:
        """Context manager around one step; ``work`` is the step's work cost (e.g. tokens)."""
        return _StepSpan(self, work)

    def phase(self, name: str, *, category: str | None = None, gpu: bool = False) -> _Span:
        """Context manager timing one phase (host wall time; plus CUDA events if ``gpu``).

        ``category`` is one of data / compute / sync / other (default from the name, see
        :func:`gpubalance.diagnose.format.category_of`). A phase outside ``step()`` counts
        towards the next step (e.g. waiting for the DataLoader before the step starts).
        """
        nid = self._name_id(name, category)
        return _Span(self, nid, KIND_PHASE, 0.0, gpu and self._cuda)

    def collective(self, name: str, nbytes: int = 0) -> _Span:
        """Context manager timing a collective call (category sync, ``nbytes`` message size)."""
        nid = self._name_id(name, "sync")
        return _Span(self, nid, KIND_COLL, float(nbytes), self._cuda)

    def add_work(self, work: float) -> None:
        """Add work cost (e.g. tokens) to the current (or next) step."""
        self._buf.append((self._step, 0, KIND_WORK, 0, 0, 0, float(work)))

    def timed(self, iterable: Iterable[Any], name: str = "data") -> Iterator[Any]:
        """Iterate ``iterable`` timing each ``next()`` as phase ``name`` (DataLoader wait)."""
        nid = self._name_id(name, "data")
        it = iter(iterable)
        while True:
            with _Span(self, nid, KIND_PHASE, 0.0, False):
                try:
                    item = next(it)
                except StopIteration:
                    return
            yield item

    @property
    def ddp_comm_hook(self) -> Callable[[Any, Any], Any]:
        """A DDP communication hook: all-reduce (average) timed from launch to completion.

        Register with ``ddp_model.register_comm_hook(None, tracer.ddp_comm_hook)`` (or a
        process group as the state). Recorded as collective ``ddp_all_reduce`` nested
        (depth 2) so it does not add to the step's top-level phase sums (it overlaps
        backward compute).
        """

        def hook(state: Any, bucket: Any) -> Any:
            return self._ddp_all_reduce(state, bucket)

        # DDP checks the hook's annotations against dist.GradBucket / Future[Tensor];
        # under postponed annotations they are strings, so present none
        hook.__annotations__ = {}
        return hook

    def _ddp_all_reduce(self, state: Any, bucket: Any) -> Any:
        import torch.distributed as dist

        group = state if state is not None else dist.group.WORLD
        world = dist.get_world_size(group)
        buf = bucket.buffer()
        buf.div_(world)
        nid = self._name_id("ddp_all_reduce", "sync")
        step = self._step
        nbytes = float(_nbytes(buf))
        t0 = _perf_ns()
        fut = dist.all_reduce(buf, group=group, async_op=True).get_future()

        def _done(f: Any) -> Any:
            t1 = _perf_ns()
            self._buf.append((step, nid, KIND_COLL, 2, t0 - self._base_ns, t1 - t0, nbytes))
            return f.value()[0]

        return fut.then(_done)

    # ----------------------------------------------------------------- internals
    def _name_id(self, name: str, category: str | None) -> int:
        if category is None:
            cat = category_of(name)
        else:
            from gpubalance.diagnose.format import CATEGORIES

            if category not in CATEGORIES:
                raise UserInputError(
                    f"unknown phase category {category!r}; use one of {', '.join(CATEGORIES)}"
                )
            cat = CATEGORIES.index(category)
        key = (name, cat)
        nid = self._names.get(key)
        if nid is None:
            nid = len(self._names) + 1
            if nid > 65535:
                raise UserInputError("more than 65535 distinct phase names")
            self._names[key] = nid
            self._buf.append(name_record(nid, name, cat))
        return nid

    def flush(self) -> None:
        """Append buffered records to the file (called by the flush thread or inline)."""
        with self._lock:
            if self._fh is None:
                return
            n = len(self._buf)
            buf = [self._buf.popleft() for _ in range(n)]
            if buf:
                arr = np.array(buf, dtype=RECORD_DTYPE)
                self._fh.write(arr.tobytes())
                self._fh.flush()

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            self.flush()

    def _resolve_run_id(self) -> str:
        if self._run_id_arg:
            return self._run_id_arg
        env = os.environ.get("GPUBALANCE_RUN_ID") or os.environ.get("TORCHELASTIC_RUN_ID")
        if env and env != "none":
            return env
        rid = uuid.uuid4().hex[:16]
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                box = [rid]
                dist.broadcast_object_list(box, src=0)
                rid = str(box[0])
        except ImportError:  # pragma: no cover
            pass
        return rid

    def _resume(self, path: Path) -> None:
        from gpubalance.diagnose.reader import read_tracer_file

        old = read_tracer_file(path)
        if old.header.get("run_id") != self.run_id:
            raise UserInputError(
                f"trace file belongs to run {old.header.get('run_id')!r}, not {self.run_id!r};"
                " write to a new directory",
                file=path,
            )
        # continue the clock, the step numbering and the name table of the earlier session
        elapsed = time.time_ns() - int(old.header["start_unix_ns"])
        self._base_ns = _perf_ns() - elapsed
        self._step = old.next_step
        for nid, (name, cat) in old.names.items():
            self._names[(name, cat)] = nid

    def _start_nvml(self, interval_s: float) -> None:
        from gpubalance.diagnose.nvml import (
            Nvml,
            NvmlSampler,
            NvmlUnavailable,
            nvml_file_name,
            visible_nvml_indices,
        )

        try:
            with Nvml.open(self._nvml_module) as nv:
                devs = nv.devices()
            index: int | None = None
            if self._want_cuda():
                import torch

                uuid = str(getattr(torch.cuda.get_device_properties(None), "uuid", ""))
                index = next((d.index for d in devs if d.uuid.endswith(uuid) and uuid), None)
            if index is None:
                vis = visible_nvml_indices(devs)
                local = int(os.environ.get("LOCAL_RANK", str(max(self.rank, 0))))
                index = vis[local] if local < len(vis) else None
            self._sampler = NvmlSampler(
                self.out_dir / nvml_file_name(self.rank),
                interval_s=interval_s,
                rank=self.rank,
                indices=None if index is None else [index],
                module=self._nvml_module,
            ).start()
        except NvmlUnavailable as exc:
            import warnings

            msg = f"NVML telemetry off: {exc}"
            self.notes.append(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=3)

    # CUDA events: begin/end push event pairs; resolution waits for query() to be True.
    def _want_cuda(self) -> bool:
        if self._cuda_arg is False:
            return False
        try:
            import torch

            return bool(torch.cuda.is_available())
        except ImportError:  # pragma: no cover
            return False

    def _event(self) -> Any:
        if self._event_pool:
            return self._event_pool.pop()
        import torch

        return torch.cuda.Event(enable_timing=True)

    def _cuda_begin(self) -> None:
        ev = self._event()
        ev.record()
        self._cuda_stack.append(ev)

    def _cuda_end(self, step: int, name_id: int) -> None:
        ev = self._event()
        ev.record()
        start = self._cuda_stack.pop()
        self._cuda_pending.append((step, name_id, start, ev))

    def _cuda_resolve(self, *, force: bool) -> None:
        keep: list[tuple[int, int, Any, Any]] = []
        horizon = self._step - self.cuda_lag_steps
        for item in self._cuda_pending:
            step, nid, start, end = item
            if not force and (step > horizon or not end.query()):
                keep.append(item)
                continue
            if force:
                end.synchronize()
            dur_ns = int(start.elapsed_time(end) * 1e6)
            self._buf.append((step, nid, KIND_GPU, 1, 0, dur_ns, 0.0))
            self._event_pool.append(start)
            self._event_pool.append(end)
        self._cuda_pending = keep
