"""Per-request records of a load test, and the error kinds they can carry.

Times are seconds on the load generator's monotonic clock, relative to the start of the run
(the first scheduled send is at about 0). A record is either ``ok`` (a complete,
OpenAI-shaped answer) or failed with one :data:`ERROR_KINDS` kind; failed records are kept
for the error report but left out of latency figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ERROR_KINDS", "RequestRecord", "RequestSpec"]

#: connect: the TCP connection could not be made (refused, unreachable, DNS);
#: timeout: no complete answer within the client timeout;
#: http_status: the server answered with a non-2xx status;
#: bad_body: a 2xx answer that is not an OpenAI-shaped body (not JSON, fields missing,
#: an ``error`` object inside a stream);
#: disconnect: the connection closed before the answer was complete (mid-stream);
#: other: anything else (named in the detail).
ERROR_KINDS = ("connect", "timeout", "http_status", "bad_body", "disconnect", "other")


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send: when (seconds after run start), and its token targets."""

    index: int
    scheduled_s: float
    input_tokens: int
    output_tokens: int


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request.

    ``scheduled_s`` is when the schedule said to send (closed loop: equals ``sent_s``);
    ``sent_s`` when the request was actually issued; ``end_s`` when the answer was complete
    or the failure was seen; ``ttft_s`` the time from send to the first content token
    (streaming only; non-streaming answers have ``ttft_s == e2e_s``); ``itl_s`` the gaps
    between consecutive content chunks. Token counts are the server's ``usage`` figures
    when it reports them, else the targets (input) and the number of content chunks
    (streamed output).
    """

    index: int
    scheduled_s: float
    sent_s: float
    end_s: float = math.nan
    input_tokens: int = 0
    output_tokens: int = 0
    ok: bool = False
    ttft_s: float = math.nan
    itl_s: list[float] = field(default_factory=list)
    status: int = 0
    error_kind: str = ""
    error_detail: str = ""
    run: str = ""

    @property
    def e2e_s(self) -> float:
        """End-to-end latency from send to complete answer, seconds."""
        return self.end_s - self.sent_s

    @property
    def lateness_s(self) -> float:
        """Actual send time minus scheduled send time, seconds."""
        return self.sent_s - self.scheduled_s

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``itl_s`` included as a list)."""
        return {
            "index": self.index,
            "run": self.run,
            "scheduled_s": self.scheduled_s,
            "sent_s": self.sent_s,
            "end_s": self.end_s,
            "e2e_s": self.e2e_s,
            "ttft_s": None if math.isnan(self.ttft_s) else self.ttft_s,
            "itl_s": self.itl_s,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "ok": self.ok,
            "status": self.status,
            "error_kind": self.error_kind,
            "error_detail": self.error_detail,
        }
