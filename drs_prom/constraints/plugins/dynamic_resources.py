"""DynamicResources' PreFilter, as far as drs-prom goes: a pod with what drs-prom cannot check (ResourceClaims, set in
``PodRequest.unsupported`` by the parser) is turned away on every node, with a reason naming it and the way to run
it (kube-scheduler with drs-prom as its extender): never bound on a guess."""

from __future__ import annotations

from collections.abc import Sequence

from drs_prom.constraints.framework import ClusterHints, Filter, Rejection, Stage, unsupported_reason
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest


class DynamicResources(Filter):
    name = "DynamicResources"
    stage = Stage.PLACED
    order = 5

    def needed(self, pod: PodRequest, hints: ClusterHints) -> bool:
        return bool(pod.unsupported)

    def prefilter(self, pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours) -> object:
        return Rejection(unsupported_reason(pod.unsupported), pod.unsupported) if pod.unsupported else None

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        return ()


FILTER = DynamicResources()
