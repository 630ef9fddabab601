"""Structured JSON access log: one line per request, buffered and flushed periodically so
the event loop does no per-request I/O.

Each line holds ``ts`` (unix seconds), ``endpoint``, ``model``, ``pool``, ``backend``,
``status``, ``input_tokens`` (estimate), ``output_tokens`` (when the response says),
``latency_s``, ``ttft_s`` (seconds to the first response byte), and when they apply
``tenant`` (from the client key), ``cache`` (memory/redis hit) and ``error`` (its kind).
"""

from __future__ import annotations

import sys
from typing import IO, Any

import orjson

__all__ = ["AccessLog"]


class AccessLog:
    """Buffered JSON-lines writer; ``path`` "-" writes to stdout. Call :meth:`open` first."""

    def __init__(self, path: str, max_buffer_lines: int = 4096) -> None:
        self.path = path
        self.max_buffer_lines = max_buffer_lines
        self._buf: list[bytes] = []
        self._fh: IO[bytes] | None = None

    def open(self) -> None:
        self._fh = sys.stdout.buffer if self.path == "-" else open(self.path, "ab")  # noqa: SIM115

    def write(self, record: dict[str, Any]) -> None:
        """Queue one record (flushed by :meth:`flush`, or now if the buffer is full)."""
        self._buf.append(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
        if len(self._buf) >= self.max_buffer_lines:
            self.flush()

    def flush(self) -> None:
        if not self._buf or self._fh is None:
            return
        data = b"".join(self._buf)
        self._buf.clear()
        self._fh.write(data)
        self._fh.flush()

    def close(self) -> None:
        self.flush()
        if self._fh is not None and self.path != "-":
            self._fh.close()
        self._fh = None
