"""Failure-domain arithmetic: what one node failure takes away from a fleet.

A fleet of ``nodes`` identical nodes loses ``1 / nodes`` of its capacity when one node
fails, i.e. ``gpus_per_node`` GPUs and ``replicas_per_node`` replicas at once. Bigger nodes
mean fewer, larger failure domains and coarser scaling steps; the guide's advice is to
scale out on small nodes unless the model, the SLA or the concurrency needs big ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpubalance.plan.shapes import Shape

__all__ = ["FailureDomain", "failure_domain", "nodes_needed"]


def nodes_needed(replicas: int, shape: Shape, *, spare_nodes: int = 0) -> int:
    """Nodes of ``shape`` that hold ``replicas`` replicas, plus ``spare_nodes`` spare ones."""
    if replicas < 0 or spare_nodes < 0:
        raise ValueError("replicas and spare_nodes must be >= 0")
    return math.ceil(replicas / shape.replicas_per_node) + spare_nodes


@dataclass(frozen=True, slots=True)
class FailureDomain:
    """Size of one failure domain (one node) of a fleet and what losing it does.

    Attributes:
        nodes: nodes in the fleet.
        gpus_lost: GPUs that go down with one node.
        replicas_lost: replicas that go down with one node.
        capacity_lost_fraction: share of the fleet's replicas lost with one node (1/nodes).
        spare_replicas: replicas beyond the minimum the SLA needs at the sizing load.
        sla_holds_one_node_down_now: SLA still met at today's load with nodes - 1 nodes.
        sla_holds_one_node_down_growth: same at the load projected after growth.
    """

    nodes: int
    gpus_lost: int
    replicas_lost: int
    capacity_lost_fraction: float
    spare_replicas: int
    sla_holds_one_node_down_now: bool
    sla_holds_one_node_down_growth: bool


def failure_domain(
    shape: Shape,
    nodes: int,
    replicas_needed: int,
    *,
    holds_one_down_now: bool,
    holds_one_down_growth: bool,
) -> FailureDomain:
    """Failure domain of ``nodes`` nodes of ``shape`` sized for ``replicas_needed`` replicas.

    ``holds_one_down_*`` are the simulated answers for ``nodes - 1`` nodes (False when
    ``nodes`` is 1: losing the only node loses everything).
    """
    if nodes < 1:
        raise ValueError(f"a fleet needs at least one node, got {nodes}")
    single = nodes == 1
    return FailureDomain(
        nodes=nodes,
        gpus_lost=shape.gpus_per_node,
        replicas_lost=shape.replicas_per_node,
        capacity_lost_fraction=1.0 / nodes,
        spare_replicas=nodes * shape.replicas_per_node - replicas_needed,
        sla_holds_one_node_down_now=holds_one_down_now and not single,
        sla_holds_one_node_down_growth=holds_one_down_growth and not single,
    )
