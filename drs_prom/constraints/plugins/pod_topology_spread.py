"""PodTopologySpread's DoNotSchedule constraints: a node may take the pod only if its topology domain would not hold
more than ``maxSkew`` matching pods above the emptiest eligible domain.

PreFilter counts, once per pod, the matching pods in every domain of every constraint over the nodes that have all
the constraints' keys and pass nodeAffinityPolicy / nodeTaintsPolicy; Filter reads the counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from drs_prom.constraints.framework import ClusterHints, Filter, Stage
from drs_prom.constraints.matching import is_everything, selector_matches, tolerates, tuple_selector_matches
from drs_prom.constraints.placed import Neighbours
from drs_prom.constraints.plugins.node_affinity import matches_node_affinity
from drs_prom.types import LabelSelector, NodeInfo, PodRecord, PodRequest, SpreadConstraint

R_SPREAD = "node(s) didn't match pod topology spread constraints"
R_SPREAD_LABEL = R_SPREAD + " (missing required label)"


@dataclass(frozen=True)
class SpreadState:
    """Per constraint: matching pods per domain, the lowest count (0 below ``minDomains``), 1 if the pod matches
    its own selector."""

    counts: list[dict[str, int]]
    lowest: list[int]
    own: list[int]


def spread_eligible(pod: PodRequest, c: SpreadConstraint, node: NodeInfo) -> bool:
    """nodeAffinityPolicy / nodeTaintsPolicy: which nodes' pods count for constraint ``c``."""
    if c.node_affinity_policy != "Ignore" and not matches_node_affinity(pod, node):
        return False
    if c.node_taints_policy == "Honor":
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in pod.tolerations):
                return False
    return True


def count_matching(selector: LabelSelector, namespace: str, pods: Sequence[PodRecord]) -> int:
    """Pods of ``namespace`` that ``selector`` selects, terminating ones aside (PodTopologySpread's count;
    an empty selector counts nothing, as in kube-scheduler)."""
    if is_everything(selector) or selector.nothing:
        return 0
    if selector.match_expressions:
        return sum(
            1
            for p in pods
            if not p.terminating and p.namespace == namespace and tuple_selector_matches(selector, p.labels)
        )
    # matchLabels only (the common selector): tuple_selector_matches' test, inline and first (it turns most pods
    # away), since a ScheduleAnyway score counts every placed pod in the cluster for each pod it decides
    pairs = selector.match_labels
    if len(pairs) == 1:
        pair = pairs[0]
        return sum(1 for p in pods if pair in p.labels and not p.terminating and p.namespace == namespace)
    return sum(
        1 for p in pods if all(map(p.labels.__contains__, pairs)) and not p.terminating and p.namespace == namespace
    )


class PodTopologySpread(Filter):
    name = "PodTopologySpread"
    stage = Stage.PLACED
    order = 70

    def needed(self, pod: PodRequest, hints: ClusterHints) -> bool:
        return bool(pod.spread)

    def prefilter(self, pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours) -> object:
        counts: list[dict[str, int]] = [{} for _ in pod.spread]
        for node in nodes:
            labels = node.labels
            if not all(c.topology_key in labels for c in pod.spread):
                continue
            pods = near.pods_by_node.get(node.name, ())
            for i, c in enumerate(pod.spread):
                if not spread_eligible(pod, c, node):
                    continue
                value = labels[c.topology_key]
                counts[i][value] = counts[i].get(value, 0) + count_matching(c.selector, pod.namespace, pods)
        lowest = []
        for i, c in enumerate(pod.spread):
            least = min(counts[i].values()) if counts[i] else 2**31 - 1
            lowest.append(0 if len(counts[i]) < c.min_domains else least)
        own = [1 if selector_matches(c.selector, pod.labels) else 0 for c in pod.spread]
        return SpreadState(counts, lowest, own)

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        if not isinstance(state, SpreadState):
            return ()
        for i, c in enumerate(pod.spread):
            value = node.labels.get(c.topology_key)
            if value is None:
                return (R_SPREAD_LABEL,)
            if state.counts[i].get(value, 0) + state.own[i] - state.lowest[i] > c.max_skew:
                return (R_SPREAD,)
        return ()

    def eviction_may_help(self, reasons: Sequence[str]) -> bool:
        return bool(reasons) and reasons[0] != R_SPREAD_LABEL


FILTER = PodTopologySpread()
