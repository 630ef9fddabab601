"""The tracer's on-disk format: one compact, appendable binary file per rank.

Layout (little endian)::

    b"GPBTRACE"            8 bytes magic
    uint32 header_len      length of the JSON header that follows
    header JSON            run_id, rank, world_size, host, version, start_unix_ns, pid, ...
    records                a stream of fixed-size 32-byte records (:data:`RECORD_DTYPE`)

A record is ``(step i4, name_id u2, kind u1, depth u1, start_ns i8, dur_ns i8, value f8)``.
``start_ns`` is nanoseconds since the header's ``start_unix_ns`` (taken from a monotonic
clock), ``dur_ns`` a duration in nanoseconds. Names are declared once by a ``KIND_NAME``
record whose 24 payload bytes hold the UTF-8 name (NUL padded) and whose ``depth`` byte holds
the name's category (:data:`CATEGORIES`). Because every record has the same size, a file cut
short by a crash loses at most its last partial record, and appending is a plain write.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import orjson

__all__ = [
    "CATEGORIES",
    "CAT_COMPUTE",
    "CAT_DATA",
    "CAT_OTHER",
    "CAT_SYNC",
    "FORMAT_VERSION",
    "KIND_COLL",
    "KIND_GPU",
    "KIND_NAME",
    "KIND_PHASE",
    "KIND_STEP",
    "KIND_WORK",
    "MAGIC",
    "RECORD_DTYPE",
    "RECORD_SIZE",
    "category_of",
    "encode_header",
    "name_record",
    "trace_file_name",
]

MAGIC = b"GPBTRACE"
FORMAT_VERSION = 1
RECORD_DTYPE = np.dtype(
    [
        ("step", "<i4"),
        ("name_id", "<u2"),
        ("kind", "u1"),
        ("depth", "u1"),
        ("start_ns", "<i8"),
        ("dur_ns", "<i8"),
        ("value", "<f8"),
    ]
)
RECORD_SIZE = RECORD_DTYPE.itemsize  # 32 bytes
NAME_PAYLOAD_BYTES = 24

KIND_STEP = 0  # one per step: the step's wall time
KIND_PHASE = 1  # a named phase, host wall time
KIND_GPU = 2  # a named phase, GPU time from CUDA events (resolved lazily)
KIND_WORK = 3  # the step's work cost in ``value`` (e.g. tokens)
KIND_COLL = 4  # a timed collective: host wall time, ``value`` = message bytes
KIND_NAME = 5  # declares ``name_id``; payload holds the name, ``depth`` the category

CAT_DATA, CAT_COMPUTE, CAT_SYNC, CAT_OTHER = 0, 1, 2, 3
CATEGORIES = ("data", "compute", "sync", "other")

_COLLECTIVE_WORDS = (
    "all_reduce",
    "allreduce",
    "all_gather",
    "allgather",
    "reduce_scatter",
    "reducescatter",
    "broadcast",
    "barrier",
    "all_to_all",
    "alltoall",
    "send",
    "recv",
    "sync",
    "nccl",
)


def category_of(name: str) -> int:
    """Default category of a phase name: data / compute / sync / other.

    ``data*``, ``input*``, ``load*`` -> data; ``compute``, ``forward``, ``backward``,
    ``optimizer*``, ``fwd``, ``bwd`` -> compute; collective names and ``sync`` -> sync.
    """
    low = name.lower()
    if low.startswith(("data", "input", "load")):
        return CAT_DATA
    if low.startswith(("compute", "forward", "backward", "optim", "fwd", "bwd", "gpu")):
        return CAT_COMPUTE
    if any(w in low for w in _COLLECTIVE_WORDS):
        return CAT_SYNC
    return CAT_OTHER


def encode_header(header: dict[str, Any]) -> bytes:
    """Magic + length + JSON header bytes."""
    body = orjson.dumps(header)
    return MAGIC + struct.pack("<I", len(body)) + body


def name_record(name_id: int, name: str, category: int) -> tuple[Any, ...]:
    """A ``KIND_NAME`` record as a tuple matching :data:`RECORD_DTYPE`."""
    raw = name.encode("utf-8")[:NAME_PAYLOAD_BYTES].ljust(NAME_PAYLOAD_BYTES, b"\0")
    a, b, c = struct.unpack("<qqd", raw)
    return (-1, name_id, KIND_NAME, category, a, b, c)


def decode_name(rec: np.ndarray) -> str:
    """The name held by one ``KIND_NAME`` record (a 0-d structured array element)."""
    raw = struct.pack("<qqd", int(rec["start_ns"]), int(rec["dur_ns"]), float(rec["value"]))
    return raw.rstrip(b"\0").decode("utf-8", errors="replace")


def trace_file_name(rank: int) -> str:
    """File name of one rank's trace inside a trace directory."""
    return f"rank{rank:05d}.gpbt"


def write_trace_file(path: str | Path, header: dict[str, Any], records: np.ndarray) -> Path:
    """Write a whole trace file atomically (temp + rename); used by tools and benchmarks."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(encode_header(header))
        fh.write(np.ascontiguousarray(records, dtype=RECORD_DTYPE).tobytes())
    os.replace(tmp, p)
    return p
