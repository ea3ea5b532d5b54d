"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes only pods that tolerate its taint."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from drs_prom.constraints.framework import Filter, Stage
from drs_prom.constraints.matching import tolerates
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest, Taint

R_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class NodeUnschedulable(Filter):
    name = "NodeUnschedulable"
    stage = Stage.NODE
    order = 10

    def key(self, pod: PodRequest) -> Hashable:
        return pod.tolerations

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        if node.unschedulable and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return (R_UNSCHEDULABLE,)
        return ()


FILTER = NodeUnschedulable()
