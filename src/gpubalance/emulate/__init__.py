"""OpenAI-compatible stand-in for a GPU server, timed by the simulator's replica model."""

from gpubalance.emulate.app import EmulatorApp
from gpubalance.emulate.engine import EmulatedRequest, Engine
from gpubalance.emulate.spec import build_replica

__all__ = ["EmulatedRequest", "EmulatorApp", "Engine", "build_replica"]
