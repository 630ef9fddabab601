"""``PARTITIONERS``: partition policies by name (``count``, ``lpt``, ``kk``)."""

from __future__ import annotations

from gpubalance.balance.partition.base import Backend, Partitioner
from gpubalance.balance.partition.count_partitioner import CountPartitioner
from gpubalance.balance.partition.kk_partitioner import KarmarkarKarpPartitioner
from gpubalance.balance.partition.lpt_partitioner import LptPartitioner
from gpubalance.registry import Registry

__all__ = ["PARTITIONERS", "get_partitioner"]

PARTITIONERS: Registry[type[Partitioner]] = Registry("partition policy")
PARTITIONERS.register(CountPartitioner.name, CountPartitioner)
PARTITIONERS.register(LptPartitioner.name, LptPartitioner)
PARTITIONERS.register(KarmarkarKarpPartitioner.name, KarmarkarKarpPartitioner)


def get_partitioner(
    name: str, *, equal_counts: bool = False, backend: Backend = "auto", refine: bool = True
) -> Partitioner:
    """A new partitioner of policy ``name``; unknown names raise UserInputError."""
    return PARTITIONERS.get(name)(equal_counts=equal_counts, backend=backend, refine=refine)
