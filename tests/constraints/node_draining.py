"""NodeDraining: a node labelled ``drs.io/draining=true`` takes no new pods, unless the pod is labelled
``drs.io/drain-ok=true`` (a node agent, a pod that cleans up after the drain)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from drs_prom.constraints.framework import Filter, Stage
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest

DRAINING = "drs.io/draining"
DRAIN_OK = "drs.io/drain-ok"
R_DRAINING = "node(s) were draining"


class NodeDraining(Filter):
    name = "NodeDraining"
    stage = Stage.NODE  # reads the node's labels and the pod's spec: cached per key
    order = 15  # after NodeUnschedulable (10), before TaintToleration (20)

    def key(self, pod: PodRequest) -> Hashable:
        return pod.labels.get(DRAIN_OK) == "true"

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        if node.labels.get(DRAINING) == "true" and pod.labels.get(DRAIN_OK) != "true":
            return (R_DRAINING,)
        return ()


FILTER = NodeDraining()
