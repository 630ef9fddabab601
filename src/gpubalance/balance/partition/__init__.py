"""Partition items with known costs into k ranks: count baseline, LPT, Karmarkar–Karp."""

from gpubalance.balance.partition.base import Partition, Partitioner, check_costs
from gpubalance.balance.partition.count_partitioner import CountPartitioner, round_robin_indices
from gpubalance.balance.partition.kk_partitioner import KarmarkarKarpPartitioner
from gpubalance.balance.partition.lpt_partitioner import LptPartitioner
from gpubalance.balance.partition.refine import swap_refine
from gpubalance.balance.partition.registry import PARTITIONERS, get_partitioner

__all__ = [
    "PARTITIONERS",
    "CountPartitioner",
    "KarmarkarKarpPartitioner",
    "LptPartitioner",
    "Partition",
    "Partitioner",
    "check_costs",
    "get_partitioner",
    "round_robin_indices",
    "swap_refine",
]
