"""Routing policy base class and registry.

A policy is a small object that picks one backend for a request from a sequence of
:class:`~gpubalance.route.state.BackendState`. It reads state and never changes it (the
caller records :meth:`BackendState.start`), except for its own cursor or random generator.
The gateway (real HTTP) and the simulator (event loop) call the very same policy objects.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar

from gpubalance.registry import Registry
from gpubalance.route.state import BackendState, NoBackendAvailable

__all__ = ["POLICIES", "RoutingPolicy", "make_policy"]


class RoutingPolicy(ABC):
    """Chooses a backend index for a request of predicted cost ``cost_s`` seconds."""

    name: ClassVar[str]

    @abstractmethod
    def choose(self, backends: Sequence[BackendState], cost_s: float = 0.0) -> int:
        """Index into ``backends`` of an eligible backend; raises NoBackendAvailable."""

    @staticmethod
    def _eligible(backends: Sequence[BackendState]) -> list[int]:
        idx = [i for i, b in enumerate(backends) if b.eligible]
        if not idx:
            raise NoBackendAvailable("no eligible backend (all unhealthy, draining or weight 0)")
        return idx


POLICIES: Registry[Callable[..., RoutingPolicy]] = Registry("routing policy")


def make_policy(name: str, *, seed: int = 0) -> RoutingPolicy:
    """A fresh policy by registry name (``round_robin``, ``least_requests``, ``least_cost``,
    ``power_of_two``, ``weighted``); ``seed`` feeds policies that draw random numbers."""
    return POLICIES.get(name)(seed=seed)
