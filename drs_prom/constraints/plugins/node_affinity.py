"""NodeAffinity: the pod's nodeSelector (every pair) and its required node affinity (any term)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from drs_prom.constraints.framework import Filter, Stage
from drs_prom.constraints.matching import term_matches
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest

R_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def matches_node_affinity(pod: PodRequest, node: NodeInfo) -> bool:
    """nodeSelector (every pair) and required node affinity (any term)."""
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return False
    if pod.affinity_terms and not any(term_matches(t, node.labels, node.name) for t in pod.affinity_terms):
        return False
    return True


class NodeAffinity(Filter):
    name = "NodeAffinity"
    stage = Stage.NODE
    order = 30

    def key(self, pod: PodRequest) -> Hashable:
        return (tuple(sorted(pod.node_selector.items())), pod.affinity_terms)

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        return () if matches_node_affinity(pod, node) else (R_AFFINITY,)


FILTER = NodeAffinity()
