"""PodTopologySpread's ScheduleAnyway constraints as a score, the way kube-scheduler scores them.

A ScheduleAnyway constraint never turns a node away; it prefers the nodes whose topology domain
holds fewer matching pods. kube-scheduler's PreScore counts, over every node that has all the
constraints' keys (and passes nodeAffinityPolicy / nodeTaintsPolicy), the matching pods in each
domain that some feasible node is in; Score gives a feasible node
``sum(count(domain) * log(domains + 2) + maxSkew - 1)`` over the constraints (for
``kubernetes.io/hostname``, the node's own pods and ``log(feasible nodes + 2)``), rounded; and
NormalizeScore maps it to 0..100 with the fewest pods at 100 (``100 * (max + min - s) // max``, all
100 when every score is 0). A feasible node without every key scores 0.

Only the pod's own ScheduleAnyway constraints count: kube-scheduler's system default constraints
(hostname and zone, for pods of Services and controllers) are not added here, so a pod that names
none is decided exactly as before.

Pure: records in, an array out; ``policy.choose`` adds it to whichever policy decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from drs_prom.constraints import placed
from drs_prom.constraints.plugins import pod_topology_spread
from drs_prom.types import NodeInfo, PodRequest

HOSTNAME = "kubernetes.io/hostname"
MAX_NODE_SCORE = 100


def _round(x: float) -> int:
    """Go's math.Round on a non-negative score: halves away from zero (Python's round() goes to even)."""
    return math.floor(x + 0.5)


def scores(
    pod: PodRequest, nodes: Sequence[NodeInfo], candidates: Sequence[int], near: placed.Neighbours
) -> np.ndarray | None:
    """0..100 for each of ``candidates`` (indices of feasible ``nodes``), None when the pod has no
    ScheduleAnyway constraint. ``nodes`` are every node (the counts cover them all)."""
    constraints = pod.soft_spread
    if not constraints:
        return None
    keys = [c.topology_key for c in constraints]
    filtered = [nodes[i] for i in candidates]
    ignored = [not all(map(n.labels.__contains__, keys)) for n in filtered]
    domains: list[dict[str, int]] = [{} for _ in constraints]
    for n, skip in zip(filtered, ignored):
        if skip:
            continue
        for i, key in enumerate(keys):
            if key != HOSTNAME:
                domains[i].setdefault(n.labels[key], 0)
    kept = len(filtered) - sum(ignored)
    weights = [math.log((kept if key == HOSTNAME else len(domains[i])) + 2) for i, key in enumerate(keys)]
    if any(domains):
        for node in nodes:
            if not all(map(node.labels.__contains__, keys)):
                continue
            pods = near.pods_by_node.get(node.name, ())
            if not pods:
                continue  # nothing to count (the common case for most nodes is cheap this way)
            for i, c in enumerate(constraints):
                value = node.labels[c.topology_key]
                if value not in domains[i]:
                    continue
                count = pod_topology_spread.count_matching(c.selector, pod.namespace, pods)
                if count and pod_topology_spread.spread_eligible(pod, c, node):
                    domains[i][value] += count
    raw = []
    for n, skip in zip(filtered, ignored):
        if skip:
            raw.append(-1)
            continue
        total = 0.0
        for i, c in enumerate(constraints):
            if c.topology_key == HOSTNAME:
                count = pod_topology_spread.count_matching(c.selector, pod.namespace, near.pods_by_node.get(n.name, ()))
            else:
                count = domains[i][n.labels[c.topology_key]]
            total += count * weights[i] + (c.max_skew - 1)
        raw.append(_round(total))
    return normalise(raw)


def normalise(raw: Sequence[int]) -> np.ndarray:
    """kube-scheduler's NormalizeScore for PodTopologySpread; -1 marks a node without every key (scores 0)."""
    valid = [s for s in raw if s >= 0]
    lo = min(valid) if valid else 0
    hi = max([0, *valid])
    out = np.zeros(len(raw), dtype=np.float64)
    for j, s in enumerate(raw):
        if s < 0:
            continue
        out[j] = MAX_NODE_SCORE if hi == 0 else MAX_NODE_SCORE * (hi + lo - s) // hi
    return out
