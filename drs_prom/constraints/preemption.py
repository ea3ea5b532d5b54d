"""DefaultPreemption as pure functions: when a pod fits nowhere, which pods to evict and on which node.

The rules are kube-scheduler's (plugins/defaultpreemption and framework/preemption), so that a pod that
names drs-prom is treated as it would be under kube-scheduler:

- only a pod whose ``preemptionPolicy`` is not ``Never`` preempts, and only pods of strictly lower
  priority are victims, whichever scheduler placed them;
- a node is a candidate only when its first failing filter says eviction can resolve it
  (``Filter.eviction_may_help``: not a taint, node affinity, unschedulable node, pod affinity, missing
  topology label, volume zone or node conflict), the pod asks for no more than the node's allocatable, and
  the pod passes every filter once all lower-priority pods are gone from it;
- on each candidate the victims are then reprieved one by one, most important first (higher priority,
  then earlier start), the pods whose eviction would break a PodDisruptionBudget before the others: a
  pod stays when the incoming pod still passes every filter with it back;
- the node chosen has the fewest budget violations, then the lowest highest-victim priority, the
  smallest sum of priorities, the fewest victims, the latest start among the highest-priority victims.

Every check runs the same filter chain as scheduling (``chain.passes``) on the state with the victims
removed, so the pod passes every filter on the post-eviction state. Budgets carry the
``status.disruptionsAllowed`` the disruption controller computes; they are read, never recomputed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from drs_prom.constraints import chain, volumes
from drs_prom.constraints.framework import FilterResult
from drs_prom.constraints.matching import selector_matches
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import LabelSelector, NodeInfo, PodRecord, PodRequest

PRIORITY_OFFSET = 2**31
"""Added to each priority before summing, as kube-scheduler does, so negative priorities sum as small ones."""


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it: ``allowed`` is ``status.disruptionsAllowed``;
    ``disrupted`` the pod names in ``status.disruptedPods`` (already counted by the apiserver)."""

    namespace: str
    selector: LabelSelector
    allowed: int
    disrupted: frozenset[str] = frozenset()

    def covers(self, pod: PodRecord) -> bool:
        """Same namespace and the selector matches; an empty selector matches nothing, as for PDBs."""
        sel = self.selector
        if pod.namespace != self.namespace or not pod.labels or sel.nothing:
            return False
        if not sel.match_labels and not sel.match_expressions:
            return False
        return selector_matches(sel, dict(pod.labels))


@dataclass(frozen=True)
class Candidate:
    """A node the pod fits on once ``victims`` (most important first) are gone."""

    node: str
    victims: tuple[PodRecord, ...]
    violations: int  # victims whose eviction breaks a PodDisruptionBudget


def importance(pod: PodRecord) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then the earlier start."""
    return (-pod.priority, pod.start)


def might_help(pod: PodRequest, node: NodeInfo, reasons: Sequence[str], failed_by: str) -> bool:
    """Whether evicting pods could make ``node`` feasible, from its first failing filter (``failed_by``) and its
    ``reasons``."""
    if not reasons or not chain.named(failed_by).eviction_may_help(reasons):
        return False
    return not _exceeds_allocatable(pod, node)


def _exceeds_allocatable(pod: PodRequest, node: NodeInfo) -> bool:
    """A request larger than the node's whole allocatable (NodeResourcesFit's unresolvable case)."""
    if pod.cpu_m > node.allocatable_cpu_m or pod.mem_bytes > node.allocatable_mem_bytes:
        return True
    return any(amount > node.allocatable_scalar.get(name, 0) for name, amount in pod.scalar if amount > 0)


def split_by_budget(pods: Sequence[PodRecord], budgets: Sequence[Budget]) -> tuple[list[PodRecord], list[PodRecord]]:
    """(violating, non-violating), order kept: each covering budget's allowance is spent in ``pods``' order,
    and a pod whose eviction takes any budget below zero violates it."""
    left = [b.allowed for b in budgets]
    violating: list[PodRecord] = []
    others: list[PodRecord] = []
    for pod in pods:
        broken = False
        for i, budget in enumerate(budgets):
            if budget.covers(pod) and pod.name not in budget.disrupted:
                left[i] -= 1
                broken = broken or left[i] < 0
        (violating if broken else others).append(pod)
    return violating, others


def without_pods(node: NodeInfo, pods: Sequence[PodRecord]) -> NodeInfo:
    """``node`` with the requests and pod count of ``pods`` (placed on it) taken away; the inverse of
    ``placed.with_pods``."""
    scalar = dict(node.requested_scalar)
    for p in pods:
        for name, amount in p.scalar:
            scalar[name] = scalar.get(name, 0) - amount
    return dataclasses.replace(
        node,
        requested_cpu_m=node.requested_cpu_m - sum(p.cpu_m for p in pods),
        requested_mem_bytes=node.requested_mem_bytes - sum(p.mem_bytes for p in pods),
        pod_count=node.pod_count - len(pods),
        requested_scalar=scalar,
    )


class _Node:
    """One node's pods while victims are taken off and put back (a working copy; inputs stay untouched)."""

    def __init__(self, pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours, index: int) -> None:
        self.pod, self.near, self.index = pod, near, index
        self.nodes = list(nodes)
        self.base = nodes[index]
        self.placed = list(near.pods_by_node.get(self.base.name, ()))

    def set_removed(self, removed: Sequence[PodRecord]) -> bool:
        """Take ``removed`` off the node (the rest stay); whether the pod then passes every filter."""
        gone = {id(p) for p in removed}
        stay = [p for p in self.placed if id(p) not in gone]
        self.nodes[self.index] = without_pods(self.base, removed)
        pods_by_node = {**self.near.pods_by_node, self.base.name: stay}
        storage = self.near.storage
        if self.pod.claims:
            every = (p for ps in pods_by_node.values() for p in ps)
            storage = dataclasses.replace(storage, in_use=volumes.claims_in_use((p.namespace, p.claims) for p in every))
        near = dataclasses.replace(self.near, pods_by_node=pods_by_node, storage=storage)
        return chain.passes(self.pod, self.nodes, near, self.index)


def select_victims(
    pod: PodRequest,
    nodes: Sequence[NodeInfo],
    near: Neighbours,
    index: int,
    budgets: Sequence[Budget],
    protected: frozenset[str] = frozenset(),
) -> Candidate | None:
    """The fewest, least important victims on ``nodes[index]`` (None: preemption cannot help there).
    ``protected``: uids never taken (room reserved for nominated pods is not a pod to evict)."""
    node = nodes[index]
    lower = [p for p in near.pods_by_node.get(node.name, ()) if p.priority < pod.priority and p.uid not in protected]
    if not lower:
        return None
    work = _Node(pod, nodes, near, index)
    if not work.set_removed(lower):
        return None
    lower.sort(key=importance)
    violating, others = split_by_budget(lower, budgets)
    off = list(lower)
    victims: list[PodRecord] = []
    violations = 0
    for group, breaks in ((violating, True), (others, False)):
        for p in group:
            off.remove(p)
            if not work.set_removed(off):
                off.append(p)
                victims.append(p)
                violations += breaks
    victims.sort(key=importance)
    return Candidate(node=node.name, victims=tuple(victims), violations=violations)


def find_candidates(
    pod: PodRequest,
    nodes: Sequence[NodeInfo],
    near: Neighbours,
    failed: FilterResult,
    budgets: Sequence[Budget],
    protected: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """Every node where preemption makes room, with its victims; ``failed`` is the failed filter pass over ``nodes``."""
    if not pod.preempts:
        return []
    out = []
    for i, node in enumerate(nodes):
        if might_help(pod, node, failed.reasons[i], failed.failed_by[i]):
            cand = select_victims(pod, nodes, near, i, budgets, protected)
            if cand is not None:
                out.append(cand)
    return out


def _earliest_top_start(c: Candidate) -> float:
    top = max(v.priority for v in c.victims)
    return min(v.start for v in c.victims if v.priority == top)


_SCORES = (
    lambda c: -c.violations,
    lambda c: -max(v.priority for v in c.victims),
    lambda c: -sum(v.priority + PRIORITY_OFFSET for v in c.victims),
    lambda c: -len(c.victims),
    _earliest_top_start,
)


def best(candidates: Sequence[Candidate]) -> list[Candidate]:
    """kube-scheduler's choice among ``candidates``: each score in turn keeps only the top ones. More
    than one left is a tie kube-scheduler breaks by its (map) order; a caller takes the first."""
    free = [c for c in candidates if not c.victims]
    if free:
        return free
    left = list(candidates)
    for score in _SCORES:
        if len(left) <= 1:
            break
        top = max(score(c) for c in left)
        left = [c for c in left if score(c) == top]
    return left


def plan(
    pod: PodRequest,
    nodes: Sequence[NodeInfo],
    near: Neighbours,
    failed: FilterResult,
    budgets: Sequence[Budget],
    protected: frozenset[str] = frozenset(),
) -> Candidate | None:
    """The node to nominate and the pods to evict for ``pod`` (None: preemption cannot help)."""
    chosen = best(find_candidates(pod, nodes, near, failed, budgets, protected))
    return chosen[0] if chosen else None
