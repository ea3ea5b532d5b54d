"""The volume filters: VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone (drs_prom.constraints.volumes).

One plugin for the four, because they share one PreFilter pass over the pod's claims (which may turn it away on every
node: a missing claim, a ReadWriteOncePod claim in use, an unbound claim of an Immediate class) and kube-scheduler
runs them back to back.
"""

from __future__ import annotations

from collections.abc import Sequence

from drs_prom.constraints import claim_binding, volumes
from drs_prom.constraints.framework import ClusterHints, Filter, Rejection, Stage, unsupported_reason
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest

UNRESOLVABLE = frozenset(
    {
        volumes.R_NODE_CONFLICT,
        volumes.R_ZONE,
        volumes.R_PV_MISSING,
        volumes.R_UNBOUND_IMMEDIATE,
        claim_binding.R_BIND_CONFLICT,
    }
)
"""Reasons kube-scheduler marks UnschedulableAndUnresolvable: the volume is where it is, evictions cannot move it."""


class VolumeFilters(Filter):
    name = "VolumeFilters"
    stage = Stage.PLACED
    order = 60

    def needed(self, pod: PodRequest, hints: ClusterHints) -> bool:
        return bool(pod.claims)

    def prefilter(self, pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours) -> object:
        found = volumes.prefilter(pod, near.storage)
        if isinstance(found, tuple):
            reason, unsupported = found
            return Rejection(unsupported_reason([reason]), (reason,)) if unsupported else Rejection(reason)
        return found

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        if not isinstance(state, volumes.VolumeState):
            return ()
        return volumes.reasons(state, node, near.pods_by_node.get(node.name, ()))

    def eviction_may_help(self, reasons: Sequence[str]) -> bool:
        return bool(reasons) and reasons[0] not in UNRESOLVABLE


FILTER = VolumeFilters()
