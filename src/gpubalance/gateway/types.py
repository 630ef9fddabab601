"""ASGI type aliases used by the gateway and the emulator (see :mod:`gpubalance.asgi`)."""

from __future__ import annotations

from gpubalance.asgi import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send"]
