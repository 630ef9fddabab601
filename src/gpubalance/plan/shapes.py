"""Deployment shapes: GPU type x GPUs per node x tensor-parallel degree.

A shape is one kind of node: ``gpus_per_node`` GPUs of one type, split into
``gpus_per_node // tp`` replicas of ``tp`` GPUs each (a replica is one model copy: a GPU or
a tensor-parallel group inside the node). A fleet is ``nodes`` identical such nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["NODE_SIZES", "GpuOffer", "Shape", "enumerate_shapes"]

#: GPUs per node considered by the planner (capped by each GPU's ``max_gpus_per_node``).
NODE_SIZES: tuple[int, ...] = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class GpuOffer:
    """What the planner needs to know about one GPU type.

    Attributes:
        name: catalog name (e.g. ``H100-SXM``).
        memory_bytes: memory of one GPU, bytes.
        max_gpus_per_node: largest node the GPU is sold in (e.g. 8 for SXM boards).
        price_gpu_hour_usd: on-demand price of one GPU for one hour, US dollars.
        price_source: where the price comes from (catalog citation or user price file).
    """

    name: str
    memory_bytes: int
    max_gpus_per_node: int
    price_gpu_hour_usd: float
    price_source: str = ""


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """One node kind: ``gpus_per_node`` GPUs of type ``gpu``, replicas of ``tp`` GPUs each."""

    gpu: str
    gpus_per_node: int
    tp: int

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1 or self.tp < 1 or self.gpus_per_node % self.tp:
            raise ValueError(f"tp={self.tp} must divide gpus_per_node={self.gpus_per_node}")

    @property
    def replicas_per_node(self) -> int:
        """Model replicas on one node (``gpus_per_node // tp``)."""
        return self.gpus_per_node // self.tp

    @property
    def label(self) -> str:
        """E.g. ``H100-SXM 8x (TP2 x4)``."""
        return f"{self.gpu} {self.gpus_per_node}x (TP{self.tp} x{self.replicas_per_node})"


def enumerate_shapes(
    gpus: Iterable[GpuOffer], node_sizes: Iterable[int] = NODE_SIZES
) -> Iterator[Shape]:
    """Every (GPU, GPUs per node, TP) with TP dividing the node size, node size capped by
    the GPU's ``max_gpus_per_node``. Memory fit is checked by the caller (it depends on the
    model and precision), once per (GPU, TP)."""
    sizes = sorted(set(node_sizes))
    for offer in gpus:
        for n in sizes:
            if n > offer.max_gpus_per_node:
                continue
            for tp in range(1, n + 1):
                if n % tp == 0:
                    yield Shape(offer.name, n, tp)
