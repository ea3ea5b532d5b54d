"""Which nodes may take a pod: kube-scheduler's core filters, as pure functions.

Each node gets a list of reasons (empty = feasible) worded like kube-scheduler's, so a
``FailedScheduling`` event reads the same as the stock scheduler's::

    0/5 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: true}, ...

These are the filters that read the node alone: NodeUnschedulable, TaintToleration,
NodeAffinity and NodeResourcesFit (cpu, memory, pod count and every scalar resource:
ephemeral-storage, hugepages-*, extended resources such as nvidia.com/gpu). ``interpod``
adds those that read the other pods (NodePorts, PodTopologySpread, InterPodAffinity) and
runs the whole chain in kube-scheduler's order; as there, the first failing plugin decides
a node's reasons, and the resource check reports every insufficient resource at once.

A node that is not Ready counts as tainted ``node.kubernetes.io/not-ready:NoSchedule``
(what the node lifecycle controller would add), so a pod tolerating that taint may
still land there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from drs_prom.types import NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodRequest, Taint, Toleration

NOT_READY_TAINT = Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule")
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
_GO_INT = re.compile(r"[+-]?[0-9]+")

R_UNSCHEDULABLE = "node(s) were unschedulable"
R_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
R_CPU = "Insufficient cpu"
R_MEM = "Insufficient memory"
R_PODS = "Too many pods"


def _taint_text(t: Taint) -> str:
    return f"node(s) had untolerated taint {{{t.key}: {t.value}}}"


# -- single checks (pure, one concern each) ------------------------------------


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint: effect, key and value/operator must all match."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    if tol.operator not in ("Equal", ""):  # an unknown operator tolerates nothing, as in Kubernetes
        return False
    if not tol.key:  # Equal with an empty key matches nothing (only Exists may omit the key)
        return False
    return tol.value == taint.value


def untolerated_taint(pod: PodRequest, node: NodeInfo) -> Taint | None:
    """First NoSchedule/NoExecute taint the pod does not tolerate (PreferNoSchedule is a score)."""
    taints = list(node.taints)
    if not node.ready:
        taints.append(NOT_READY_TAINT)
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(tol, taint) for tol in pod.tolerations):
            return taint
    return None


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions requirement of a node selector term or (without Gt/Lt) of a label selector."""
    present = req.key in labels
    value = labels.get(req.key, "")
    op = req.operator
    if op == "In":
        return present and value in req.values
    if op == "NotIn":
        return not present or value not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        have, want = _go_int(value), _go_int(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False  # unknown operator: the apiserver rejects these, never match


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): ASCII digits with an optional sign, in int64 range.

    Python's int() also takes spaces, underscores and non-ASCII digits ("1_0" is 10), which
    would let a Gt/Lt requirement match a node kube-scheduler refuses.
    """
    if not isinstance(text, str) or not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _field_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    """matchFields: only metadata.name with In/NotIn exists (the apiserver refuses the rest)."""
    if req.key != "metadata.name":
        return False
    if req.operator == "In":
        return node_name in req.values
    if req.operator == "NotIn":
        return node_name not in req.values
    return False


def term_matches(term: NodeSelectorTerm, labels: dict[str, str], node_name: str = "") -> bool:
    """Requirements are ANDed; a term with no requirements matches nothing (as in Kubernetes)."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        _field_matches(f, node_name) for f in term.match_fields
    )


def matches_node_affinity(pod: PodRequest, node: NodeInfo) -> bool:
    """nodeSelector (every pair) and required node affinity (any term)."""
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return False
    if pod.affinity_terms and not any(term_matches(t, node.labels, node.name) for t in pod.affinity_terms):
        return False
    return True


def resource_reasons(pod: PodRequest, node: NodeInfo) -> list[str]:
    """NodeResourcesFit: requests against allocatable minus what bound pods requested.

    Every resource the pod requests is checked: cpu, memory, then ``pod.scalar`` (ephemeral-storage,
    hugepages-*, extended and device-plugin resources such as nvidia.com/gpu); a resource the node
    does not advertise has allocatable 0. A zero request is never checked, as in kube-scheduler.
    """
    out: list[str] = []
    if node.pod_count + 1 > node.allocatable_pods:
        out.append(R_PODS)
    if pod.cpu_m > 0 and pod.cpu_m > node.allocatable_cpu_m - node.requested_cpu_m:
        out.append(R_CPU)
    if pod.mem_bytes > 0 and pod.mem_bytes > node.allocatable_mem_bytes - node.requested_mem_bytes:
        out.append(R_MEM)
    for name, amount in pod.scalar:
        if amount > 0 and amount > node.allocatable_scalar.get(name, 0) - node.requested_scalar.get(name, 0):
            out.append(f"Insufficient {name}")
    return out


def fits(pod: PodRequest, node: NodeInfo) -> bool:
    """Only the request fit (cpu, memory, pod count) — what the simulator needs most."""
    return not resource_reasons(pod, node)


def static_reasons(pod: PodRequest, node: NodeInfo) -> list[str]:
    """NodeUnschedulable, TaintToleration and NodeAffinity: the filters that read only the node."""
    if node.unschedulable and not any(
        tolerates(t, Taint(key=UNSCHEDULABLE_TAINT_KEY, effect="NoSchedule")) for t in pod.tolerations
    ):
        return [R_UNSCHEDULABLE]
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return [_taint_text(taint)]
    if not matches_node_affinity(pod, node):
        return [R_AFFINITY]
    return []


def check(pod: PodRequest, node: NodeInfo) -> list[str]:
    """Why ``pod`` cannot go to ``node`` (empty list: it can), by the filters that read the node alone
    (``interpod.check`` adds those that read the other pods)."""
    return static_reasons(pod, node) or resource_reasons(pod, node)


# -- over all nodes -------------------------------------------------------------


@dataclass(frozen=True)
class FilterResult:
    """``mask[i]`` is True when ``nodes[i]`` is feasible; ``reasons[i]`` says why not.

    ``prefilter`` is set when the pod was turned away before any node was looked at (kube-scheduler's
    PreFilter rejection): every node then carries that one reason and the summary names it once.
    """

    mask: np.ndarray
    reasons: tuple[tuple[str, ...], ...]
    prefilter: str = ""
    refused: tuple[str, ...] = ()  # what drs-prom could not decide, when that is why the pod was turned away

    @property
    def any(self) -> bool:
        return bool(self.mask.any())


def filter_nodes(pod: PodRequest, nodes: Sequence[NodeInfo]) -> FilterResult:
    reasons = tuple(tuple(check(pod, n)) for n in nodes)
    mask = np.array([not r for r in reasons], dtype=bool)
    return FilterResult(mask=mask, reasons=reasons)


def feasible_mask(pod: PodRequest, nodes: Sequence[NodeInfo]) -> np.ndarray:
    """Boolean mask over ``nodes`` after every core filter."""
    return filter_nodes(pod, nodes).mask


def failure_message(result: FilterResult) -> str:
    """kube-scheduler's summary: counts per reason, sorted by reason text (or the PreFilter reason)."""
    total = len(result.reasons)
    if result.prefilter:
        return f"0/{total} nodes are available: {result.prefilter}."
    counts = Counter(r for rs in result.reasons for r in rs)
    available = int(result.mask.sum())
    if not counts:
        return f"{available}/{total} nodes are available."
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"{available}/{total} nodes are available: {parts}."


# -- vectorised over node arrays (the scheduler's hot path) -------------------------


def constraint_key(pod: PodRequest) -> tuple[object, ...]:
    """What the node-dependent but request-independent filters read from a pod
    (tolerations, nodeSelector, required affinity). Pods of one workload share it, so the
    scheduler evaluates those filters once per key and node-table version, not per pod."""
    return (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.affinity_terms)


def static_mask(pod: PodRequest, nodes: Sequence[NodeInfo]) -> np.ndarray:
    """NodeUnschedulable, TaintToleration and NodeAffinity over ``nodes`` (resources aside).

    A loop over nodes, but callers cache it per ``constraint_key``: it only changes when a
    node's labels, taints or readiness change, never when a pod is bound.
    """
    probe = PodRequest(
        name=pod.name,
        cpu_m=0,
        mem_bytes=0,
        node_selector=pod.node_selector,
        affinity_terms=pod.affinity_terms,
        tolerations=pod.tolerations,
    )
    # with zero requests and room for one more pod assumed, only the static filters can fail
    return np.array(
        [not check(probe, replace_counts(n)) for n in nodes],
        dtype=bool,
    ).reshape(len(nodes))


def replace_counts(node: NodeInfo) -> NodeInfo:
    """``node`` with no pods on it (for checks that must ignore the resource filter)."""
    return NodeInfo(
        name=node.name,
        allocatable_cpu_m=node.allocatable_cpu_m,
        allocatable_mem_bytes=node.allocatable_mem_bytes,
        allocatable_pods=max(1, node.allocatable_pods),
        labels=node.labels,
        taints=node.taints,
        unschedulable=node.unschedulable,
        ready=node.ready,
        allocatable_scalar=node.allocatable_scalar,
    )


def resource_mask(
    pod: PodRequest,
    alloc_cpu_m: np.ndarray,
    alloc_mem: np.ndarray,
    alloc_pods: np.ndarray,
    req_cpu_m: np.ndarray,
    req_mem: np.ndarray,
    pod_count: np.ndarray,
    alloc_scalar: Mapping[str, np.ndarray] | None = None,
    req_scalar: Mapping[str, np.ndarray] | None = None,
) -> np.ndarray:
    """NodeResourcesFit over arrays: the same rule as ``resource_reasons``, one numpy pass.

    ``alloc_scalar``/``req_scalar`` hold one array per scalar resource some node advertises or some
    pod requested; a resource missing from them is 0 on every node.
    """
    ok = pod_count + 1 <= alloc_pods
    if pod.cpu_m > 0:
        ok &= pod.cpu_m <= alloc_cpu_m - req_cpu_m
    if pod.mem_bytes > 0:
        ok &= pod.mem_bytes <= alloc_mem - req_mem
    for name, amount in pod.scalar:
        if amount <= 0:
            continue
        have = (alloc_scalar or {}).get(name)
        if have is None:
            return np.zeros(len(ok), dtype=bool)  # no node advertises it
        used = (req_scalar or {}).get(name)
        ok &= amount <= (have - used if used is not None else have)
    return ok


# -- node sampling (kube-scheduler's percentageOfNodesToScore) ----------------------

MIN_FEASIBLE_NODES = 100
"""kube-scheduler's minFeasibleNodesToFind: below this many nodes every node is scored."""
MIN_PERCENTAGE = 5
"""kube-scheduler's minFeasibleNodesPercentageToFind."""


def nodes_to_score(n_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes to find before scoring, as kube-scheduler's numFeasibleNodesToFind.

    ``percentage`` 0 is kube-scheduler's adaptive default: 50% minus 1% per 125 nodes,
    at least 5%; never fewer than 100 nodes (all nodes in clusters below 100).
    """
    if n_nodes < MIN_FEASIBLE_NODES or percentage >= 100:
        return n_nodes
    if percentage <= 0:
        percentage = max(MIN_PERCENTAGE, 50 - n_nodes // 125)
    return max(MIN_FEASIBLE_NODES, n_nodes * percentage // 100)


def sample_feasible(mask: np.ndarray, k: int, start: int) -> tuple[np.ndarray, int]:
    """The first ``k`` feasible node indices going round from ``start``, and how many nodes
    were looked at (kube-scheduler advances its next start index by that), sorted by index."""
    n = len(mask)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    start %= n
    found = np.flatnonzero(np.roll(mask, -start))
    if len(found) > k:
        found = found[:k]
        processed = int(found[-1]) + 1
    else:
        processed = n
    return np.sort((found + start) % n), processed
