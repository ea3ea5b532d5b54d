"""The filters that read the pods already placed, and the whole filter chain in kube-scheduler's order.

kube-scheduler's default profile filters a node with NodeUnschedulable, TaintToleration,
NodeAffinity (``filters``), then NodePorts, NodeResourcesFit, the volume filters (``volumes``),
PodTopologySpread and InterPodAffinity; the first plugin that fails decides the node's reasons. The last three need the
other pods: which host ports a node's pods hold, how many pods matching a selector each topology
domain has, which pods' required anti-affinity the incoming pod would break. As in kube-scheduler's
PreFilter, those counts are made once per pod (``prepare``) and every node's check reads them.

What drs-prom cannot decide (DynamicResources claims) turns the pod away before any node is looked at, with a reason naming it: never bound on a guess.

Pure: plain records in (``types``), reasons out, worded as kube-scheduler words them.

Over 400 lines because the three filters share one PreFilter pass over the placed pods and one
per-node chain, which must stay in kube-scheduler's order in one place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from drs_prom import filters, volumes
from drs_prom.types import (
    HostPort,
    LabelSelector,
    NodeInfo,
    NodeSelectorRequirement,
    PodAffinityTerm,
    PodRecord,
    PodRequest,
    SpreadConstraint,
)

R_PORTS = "node(s) didn't have free ports for the requested pod ports"
R_POD_AFFINITY = "node(s) didn't match pod affinity rules"
R_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
R_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
R_SPREAD = "node(s) didn't match pod topology spread constraints"
R_SPREAD_LABEL = R_SPREAD + " (missing required label)"
WILDCARD_IP = "0.0.0.0"


def unsupported_reason(what: Sequence[str]) -> str:
    """The PreFilter reason for a pod drs-prom will not place: what it needs and how to run it instead."""
    return (
        f"drs-prom does not check {', '.join(what)}; schedule this pod with kube-scheduler "
        "and drs-prom as its extender (which keeps every kube-scheduler filter)"
    )


@dataclass(frozen=True)
class Neighbours:
    """The pods on each node (bound and assumed) and the labels of every namespace."""

    pods_by_node: Mapping[str, Sequence[PodRecord]] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    storage: volumes.Storage = volumes.NO_STORAGE

    def has_anti_affinity(self) -> bool:
        return any(p.anti_affinity for pods in self.pods_by_node.values() for p in pods)


EMPTY = Neighbours()


# -- selectors -----------------------------------------------------------------


LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
"""A label selector's operators; the apiserver refuses any other (Gt and Lt are node selectors' only)."""


def _expression_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    return req.operator in LABEL_SELECTOR_OPERATORS and filters.requirement_matches(req, labels)


def selector_matches(sel: LabelSelector, labels: Mapping[str, str]) -> bool:
    if sel.nothing:
        return False
    for key, value in sel.match_labels:
        if labels.get(key) != value:
            return False
    return all(_expression_matches(r, labels) for r in sel.match_expressions)


def _tuple_selector_matches(sel: LabelSelector, labels: tuple[tuple[str, str], ...]) -> bool:
    """``selector_matches`` on a record's sorted label pairs; the common matchLabels-only selector
    is decided without building a dict."""
    if sel.nothing:
        return False
    if not sel.match_expressions:
        return all(pair in labels for pair in sel.match_labels)
    return selector_matches(sel, dict(labels))


def _is_everything(sel: LabelSelector) -> bool:
    return not sel.nothing and not sel.match_labels and not sel.match_expressions


def incoming_term_matches(
    term: PodAffinityTerm, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, Mapping[str, str]]
) -> bool:
    """One of the incoming pod's terms against a pod in ``namespace``: kube-scheduler first turns a
    namespaceSelector into the namespaces it selects (an empty selector stays "every namespace")."""
    if not (
        namespace in term.namespaces
        or _is_everything(term.namespace_selector)
        or (namespace in ns_labels and selector_matches(term.namespace_selector, ns_labels[namespace]))
    ):
        return False
    return selector_matches(term.selector, labels)


def existing_term_matches(term: PodAffinityTerm, pod: PodRequest, pod_ns_labels: Mapping[str, str]) -> bool:
    """An existing pod's anti-affinity term against the incoming pod (its namespace's labels as given)."""
    if not (pod.namespace in term.namespaces or selector_matches(term.namespace_selector, pod_ns_labels)):
        return False
    return selector_matches(term.selector, pod.labels)


# -- NodePorts -----------------------------------------------------------------


def ports_conflict(want: Sequence[HostPort], used: Sequence[HostPort]) -> bool:
    """HostPortInfo.CheckConflict: a wildcard address clashes with the same protocol/port on any
    address; a specific address with itself and with the wildcard."""
    if not want or not used:
        return False
    taken = {(p.host_ip or WILDCARD_IP, p.protocol or "TCP", p.port) for p in used if p.port > 0}
    by_proto_port = {(proto, port) for _, proto, port in taken}
    for p in want:
        if p.port <= 0:
            continue
        ip, proto = p.host_ip or WILDCARD_IP, p.protocol or "TCP"
        if ip == WILDCARD_IP:
            if (proto, p.port) in by_proto_port:
                return True
        elif (WILDCARD_IP, proto, p.port) in taken or (ip, proto, p.port) in taken:
            return True
    return False


# -- what PreFilter computes once per pod ---------------------------------------------


@dataclass
class PodState:
    """Counts per topology pair (key, value) and per spread constraint, made once per pod."""

    affinity: Counter[tuple[str, str]]
    anti_affinity: Counter[tuple[str, str]]
    existing_anti: Counter[tuple[str, str]]
    self_affinity: bool  # the pod matches all its own affinity terms (it may go first)
    spread_counts: list[dict[str, int]]
    spread_min: list[int]
    spread_self: list[int]


def spread_eligible(pod: PodRequest, c: SpreadConstraint, node: NodeInfo) -> bool:
    """nodeAffinityPolicy / nodeTaintsPolicy: which nodes' pods count for constraint ``c``."""
    if c.node_affinity_policy != "Ignore" and not filters.matches_node_affinity(pod, node):
        return False
    if c.node_taints_policy == "Honor":
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(
                filters.tolerates(t, taint) for t in pod.tolerations
            ):
                return False
    return True


def count_matching(selector: LabelSelector, namespace: str, pods: Sequence[PodRecord]) -> int:
    """Pods of ``namespace`` that ``selector`` selects, terminating ones aside (PodTopologySpread's count;
    an empty selector counts nothing, as in kube-scheduler)."""
    if _is_everything(selector):
        return 0
    return sum(
        1
        for p in pods
        if not p.terminating and p.namespace == namespace and _tuple_selector_matches(selector, p.labels)
    )


def prepare(pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours) -> PodState:
    """PreFilter of InterPodAffinity and PodTopologySpread over every node and the pods on it."""
    ns_labels = near.namespace_labels
    affinity: Counter[tuple[str, str]] = Counter()
    anti: Counter[tuple[str, str]] = Counter()
    existing: Counter[tuple[str, str]] = Counter()
    own_ns = ns_labels.get(pod.namespace, {})
    n_spread = len(pod.spread)
    incoming = bool(pod.pod_affinity or pod.pod_anti_affinity)
    spread_counts: list[dict[str, int]] = [{} for _ in range(n_spread)]
    for node in nodes:
        pods = near.pods_by_node.get(node.name, ())
        labels = node.labels
        for p in pods:
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
        if n_spread and all(c.topology_key in labels for c in pod.spread):
            for i, c in enumerate(pod.spread):
                if not spread_eligible(pod, c, node):
                    continue
                value = labels[c.topology_key]
                spread_counts[i][value] = spread_counts[i].get(value, 0) + count_matching(
                    c.selector, pod.namespace, pods
                )
    spread_min = []
    for i, c in enumerate(pod.spread):
        counts = spread_counts[i]
        lowest = min(counts.values()) if counts else 2**31 - 1
        spread_min.append(0 if len(counts) < c.min_domains else lowest)
    self_affinity = bool(pod.pod_affinity) and all(
        incoming_term_matches(t, pod.namespace, pod.labels, ns_labels) for t in pod.pod_affinity
    )
    return PodState(
        affinity=affinity,
        anti_affinity=anti,
        existing_anti=existing,
        self_affinity=self_affinity,
        spread_counts=spread_counts,
        spread_min=spread_min,
        spread_self=[1 if selector_matches(c.selector, pod.labels) else 0 for c in pod.spread],
    )


# -- per node (Filter) ------------------------------------------------------------------


def spread_reason(pod: PodRequest, state: PodState, node: NodeInfo) -> str | None:
    for i, c in enumerate(pod.spread):
        value = node.labels.get(c.topology_key)
        if value is None:
            return R_SPREAD_LABEL
        skew = state.spread_counts[i].get(value, 0) + state.spread_self[i] - state.spread_min[i]
        if skew > c.max_skew:
            return R_SPREAD
    return None


def affinity_reason(pod: PodRequest, state: PodState, node: NodeInfo) -> str | None:
    labels = node.labels
    if pod.pod_affinity:
        found = True
        for t in pod.pod_affinity:
            if t.topology_key not in labels:
                return R_POD_AFFINITY
            if state.affinity[(t.topology_key, labels[t.topology_key])] <= 0:
                found = False
        if not found and not (not state.affinity and state.self_affinity):
            return R_POD_AFFINITY
    if state.anti_affinity:
        for t in pod.pod_anti_affinity:
            if t.topology_key in labels and state.anti_affinity[(t.topology_key, labels[t.topology_key])] > 0:
                return R_POD_ANTI_AFFINITY
    if state.existing_anti and any(state.existing_anti[pair] > 0 for pair in labels.items()):
        return R_EXISTING_ANTI_AFFINITY
    return None


def needs_neighbours(pod: PodRequest, existing_anti_affinity: bool) -> bool:
    """Whether any filter that reads other pods or volumes has work for ``pod`` (else they all pass)."""
    return bool(
        pod.ports or pod.pod_affinity or pod.pod_anti_affinity or pod.spread or pod.claims or existing_anti_affinity
    )


def neighbour_reason(pod: PodRequest, state: PodState | None, node: NodeInfo, near: Neighbours) -> str | None:
    """NodePorts aside, the first of PodTopologySpread and InterPodAffinity that fails on ``node``."""
    if state is None:
        return None
    return spread_reason(pod, state, node) or affinity_reason(pod, state, node)


def _ports_reason(pod: PodRequest, node: NodeInfo, near: Neighbours) -> str | None:
    if not pod.ports:
        return None
    used = [hp for p in near.pods_by_node.get(node.name, ()) for hp in p.ports]
    return R_PORTS if ports_conflict(pod.ports, used) else None


def check(
    pod: PodRequest,
    node: NodeInfo,
    state: PodState | None,
    near: Neighbours,
    vol: volumes.VolumeState | None = None,
) -> list[str]:
    """Every filter of the default profile on one node, in its order; the first failing plugin's reasons."""
    first = filters.static_reasons(pod, node)
    if first:
        return first
    ports = _ports_reason(pod, node, near)
    if ports:
        return [ports]
    fit = filters.resource_reasons(pod, node)
    if fit:
        return fit
    if vol is not None:
        why = volumes.reasons(vol, node, near.pods_by_node.get(node.name, ()))
        if why:
            return why
    other = neighbour_reason(pod, state, node, near)
    return [other] if other else []


def prefilter(pod: PodRequest, near: Neighbours) -> tuple[str, tuple[str, ...]] | volumes.VolumeState | None:
    """A reason that turns the pod away on every node, with what drs-prom could not decide (counted
    by the scheduler); else the volume state each node is checked against (None: no claims)."""
    if pod.unsupported:
        return unsupported_reason(pod.unsupported), pod.unsupported
    if not pod.claims:
        return None
    found = volumes.prefilter(pod, near.storage)
    if isinstance(found, tuple):
        reason, unsupported = found
        return (unsupported_reason([reason]), (reason,)) if unsupported else (reason, ())
    return found


def filter_all(pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours = EMPTY) -> filters.FilterResult:
    """Reasons for every node (empty: feasible), as kube-scheduler would give them."""
    pre = prefilter(pod, near)
    if isinstance(pre, tuple):
        reason, refused = pre
        return filters.FilterResult(
            mask=np.zeros(len(nodes), dtype=bool),
            reasons=tuple((reason,) for _ in nodes),
            prefilter=reason,
            refused=refused,
        )
    state = prepare(pod, nodes, near) if needs_neighbours(pod, near.has_anti_affinity()) else None
    reasons = tuple(tuple(check(pod, n, state, near, pre)) for n in nodes)
    return filters.FilterResult(
        mask=np.array([not r for r in reasons], dtype=bool).reshape(len(nodes)), reasons=reasons
    )


def neighbour_mask(
    pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours, candidates: np.ndarray, existing_anti: bool
) -> np.ndarray:
    """NodePorts, PodTopologySpread and InterPodAffinity over ``nodes``, checked only where
    ``candidates`` is True (the other filters' mask); the counts still cover every node.
    ``existing_anti``: whether any placed pod has required anti-affinity (the caller keeps count)."""
    out = candidates.copy()
    if not out.any():
        return out
    pre = prefilter(pod, near)
    if isinstance(pre, tuple):
        return np.zeros(len(nodes), dtype=bool)
    counted = pod.pod_affinity or pod.pod_anti_affinity or pod.spread or existing_anti
    state = prepare(pod, nodes, near) if counted else None
    for i in np.flatnonzero(out).tolist():
        node = nodes[i]
        if (
            _ports_reason(pod, node, near)
            or (pre is not None and volumes.reasons(pre, node, near.pods_by_node.get(node.name, ())))
            or neighbour_reason(pod, state, node, near)
        ):
            out[i] = False
    return out


def with_pods(node: NodeInfo, pods: Sequence[PodRecord]) -> NodeInfo:
    """``node`` with the requests and pod count of ``pods`` (the ones placed on it) added."""
    scalar = dict(node.requested_scalar)
    for p in pods:
        for name, amount in p.scalar:
            scalar[name] = scalar.get(name, 0) + amount
    return NodeInfo(
        name=node.name,
        allocatable_cpu_m=node.allocatable_cpu_m,
        allocatable_mem_bytes=node.allocatable_mem_bytes,
        allocatable_pods=node.allocatable_pods,
        requested_cpu_m=node.requested_cpu_m + sum(p.cpu_m for p in pods),
        requested_mem_bytes=node.requested_mem_bytes + sum(p.mem_bytes for p in pods),
        pod_count=node.pod_count + len(pods),
        labels=node.labels,
        taints=node.taints,
        unschedulable=node.unschedulable,
        ready=node.ready,
        allocatable_scalar=node.allocatable_scalar,
        requested_scalar=scalar,
    )


def record_of(pod: PodRequest, node: str) -> PodRecord:
    """The incoming pod as a placed one, once a node is chosen (assumed before its bind returns)."""
    return PodRecord(
        uid=pod.uid,
        namespace=pod.namespace,
        node=node,
        labels=tuple(sorted(pod.labels.items())),
        ports=pod.ports,
        anti_affinity=pod.pod_anti_affinity,
        cpu_m=pod.cpu_m,
        mem_bytes=pod.mem_bytes,
        scalar=pod.scalar,
        claims=pod.claims,
        name=pod.name,
        priority=pod.priority,
    )
