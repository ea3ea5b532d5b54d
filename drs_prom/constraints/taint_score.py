"""TaintToleration's score: the PreferNoSchedule taints a pod does not tolerate count against a node.

A PreferNoSchedule taint turns no pod away; kube-scheduler's TaintToleration plugin scores each feasible node by the
number of its PreferNoSchedule taints the pod does not tolerate, and its NormalizeScore maps the counts to 0..100 in
reverse (``100 - 100 * count // max``; all 100 when no feasible node has one). In the default profile it weighs 3,
more than the two resource scores together (NodeResourcesFit and NodeResourcesBalancedAllocation, 1 each), so a node
without such a taint is chosen whenever one is feasible and no other preference (spread) outweighs it. Cluster
tooling relies on that: the cluster autoscaler marks a node it means to remove with
``DeletionCandidateOfClusterAutoscaler:PreferNoSchedule``, and the rebalancer's ``taint_hot_nodes`` marks the nodes
it is relieving.

Pure: the pod and nodes in, an array out; drs_prom.constraints.soft_terms adds it beside the ScheduleAnyway spread
term (drs_prom.constraints.spread_score), each weighed as the default profile weighs it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.constraints.matching import tolerates
from drs_prom.types import NodeInfo, PodRequest

PREFER_NO_SCHEDULE = "PreferNoSchedule"
MAX_NODE_SCORE = 100
WEIGHT = 1.5
"""The term's weight beside the spread term's 1 (policy.contract.with_soft_scores): the default profile weighs
TaintToleration 3 and PodTopologySpread 2, and a policy's own 0..1 scores stand for the two resource scores (2)."""


def has_soft_taint(node: NodeInfo) -> bool:
    """Whether the node carries some PreferNoSchedule taint (else no pod's score can differ on it)."""
    return any(t.effect == PREFER_NO_SCHEDULE for t in node.taints)


def intolerable(pod: PodRequest, node: NodeInfo) -> int:
    """How many of the node's PreferNoSchedule taints the pod does not tolerate."""
    return sum(
        1
        for t in node.taints
        if t.effect == PREFER_NO_SCHEDULE and not any(tolerates(tol, t) for tol in pod.tolerations)
    )


def counts(pod: PodRequest, nodes: Sequence[NodeInfo]) -> np.ndarray:
    """Each node's count of PreferNoSchedule taints the pod does not tolerate."""
    return np.array([intolerable(pod, n) for n in nodes], dtype=np.int64)


def normalised(found: np.ndarray) -> np.ndarray | None:
    """NormalizeScore in reverse over the feasible nodes' counts of intolerable taints (``found``), 0..100 (None: all
    0, the term would change nothing)."""
    c = np.asarray(found, dtype=np.int64)
    top = int(c.max()) if len(c) else 0
    if top == 0:
        return None
    return (MAX_NODE_SCORE - MAX_NODE_SCORE * c // top).astype(np.float64)


def term(found: np.ndarray, feasible: np.ndarray) -> np.ndarray | None:
    """The weighted term for every node of ``feasible`` (0 where infeasible), from the counts of the feasible ones in
    order (``found``): ``WEIGHT x normalised(found)``, on the spread term's scale; None when it changes nothing."""
    got = normalised(found)
    if got is None:
        return None
    out = np.zeros(len(feasible), dtype=np.float64)
    out[np.flatnonzero(feasible)] = WEIGHT * got
    return out
