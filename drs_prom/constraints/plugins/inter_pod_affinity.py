"""InterPodAffinity's required terms: the pod's affinity (a matching pod in the node's domain, or the pod matching
itself where none exists yet), its anti-affinity (no matching pod there), and the placed pods' anti-affinity (the
pod must not match the terms of a pod in the node's domain).

PreFilter counts, once per pod, the matching pods per topology pair (key, value) for the three; Filter reads them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from drs_prom.constraints.framework import ClusterHints, Filter, Stage
from drs_prom.constraints.matching import existing_term_matches, incoming_term_matches
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest

R_POD_AFFINITY = "node(s) didn't match pod affinity rules"
R_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
R_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


@dataclass(frozen=True)
class AffinityState:
    """Matching pods per topology pair for the pod's affinity, its anti-affinity and the placed pods' anti-affinity;
    whether the pod matches all its own affinity terms (then it may go first)."""

    affinity: Counter[tuple[str, str]]
    anti_affinity: Counter[tuple[str, str]]
    existing_anti: Counter[tuple[str, str]]
    self_affinity: bool


class InterPodAffinity(Filter):
    name = "InterPodAffinity"
    stage = Stage.PLACED
    order = 80

    def needed(self, pod: PodRequest, hints: ClusterHints) -> bool:
        return bool(pod.pod_affinity or pod.pod_anti_affinity or hints.anti_affinity)

    def prefilter(self, pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours) -> object:
        ns_labels = near.namespace_labels
        affinity: Counter[tuple[str, str]] = Counter()
        anti: Counter[tuple[str, str]] = Counter()
        existing: Counter[tuple[str, str]] = Counter()
        own_ns = ns_labels.get(pod.namespace, {})
        incoming = bool(pod.pod_affinity or pod.pod_anti_affinity)
        for node in nodes:
            labels = node.labels
            for p in near.pods_by_node.get(node.name, ()):
                if not (incoming or p.anti_affinity):
                    continue
                p_labels = dict(p.labels)
                if pod.pod_affinity and all(
                    incoming_term_matches(t, p.namespace, p_labels, ns_labels) for t in pod.pod_affinity
                ):
                    for t in pod.pod_affinity:
                        if t.topology_key in labels:
                            affinity[(t.topology_key, labels[t.topology_key])] += 1
                for t in pod.pod_anti_affinity:
                    if t.topology_key in labels and incoming_term_matches(t, p.namespace, p_labels, ns_labels):
                        anti[(t.topology_key, labels[t.topology_key])] += 1
                for t in p.anti_affinity:
                    if t.topology_key in labels and existing_term_matches(t, pod, own_ns):
                        existing[(t.topology_key, labels[t.topology_key])] += 1
        self_affinity = bool(pod.pod_affinity) and all(
            incoming_term_matches(t, pod.namespace, pod.labels, ns_labels) for t in pod.pod_affinity
        )
        return AffinityState(affinity, anti, existing, self_affinity)

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        if not isinstance(state, AffinityState):
            return ()
        labels = node.labels
        if pod.pod_affinity:
            found = True
            for t in pod.pod_affinity:
                if t.topology_key not in labels:
                    return (R_POD_AFFINITY,)
                if state.affinity[(t.topology_key, labels[t.topology_key])] <= 0:
                    found = False
            if not found and not (not state.affinity and state.self_affinity):
                return (R_POD_AFFINITY,)
        if state.anti_affinity:
            for t in pod.pod_anti_affinity:
                if t.topology_key in labels and state.anti_affinity[(t.topology_key, labels[t.topology_key])] > 0:
                    return (R_POD_ANTI_AFFINITY,)
        if state.existing_anti and any(state.existing_anti[pair] > 0 for pair in labels.items()):
            return (R_EXISTING_ANTI_AFFINITY,)
        return ()

    def eviction_may_help(self, reasons: Sequence[str]) -> bool:
        return bool(reasons) and reasons[0] != R_POD_AFFINITY


FILTER = InterPodAffinity()
