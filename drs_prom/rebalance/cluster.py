"""What the rebalancer reads from the apiserver, and where a moved pod's replacement would go.

One list of nodes, pods and PodDisruptionBudgets per round (the rebalancer acts every minute or so: a watch cache
would buy nothing), parsed by the scheduler's own parsers (drs_prom.scheduler.watch.kube), so the filters see the
cluster as the scheduler does. ``facts`` reads what the eligibility rules need of a pod (drs_prom.moves.eligibility);
``LivePlacer`` answers drs_prom.moves.plan's question, where the scheduler that owns a pod would put its
replacement: the filter chain on the cluster with the pod gone (and this round's earlier moves made), then the policy
that stands for that scheduler (drs-prom's model for its own pods, kube-default for kube-scheduler's) with the score
terms both schedulers add to it (ScheduleAnyway spread, PreferNoSchedule taints).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from drs_prom.config import Settings
from drs_prom.constraints import chain, soft_terms
from drs_prom.constraints.placed import Neighbours, with_pods
from drs_prom.constraints.preemption import Budget, without_pods
from drs_prom.features import N_FEATURES
from drs_prom.moves.eligibility import PodFacts
from drs_prom.moves.plan import Candidate, Move, Placement
from drs_prom.policies.contract import DecisionContext, Policy, choose, input_scales
from drs_prom.scheduler.watch import kube, kube_terms
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.signals import link_capacity
from drs_prom.signals.state import node_matrix, pod_matrix, scales
from drs_prom.types import KubeClient, NodeInfo, PodRecord, PodRequest
from drs_prom.usage.owners import controller_ref, top_owner

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""The kubelet's mark on the mirror pod of a static pod."""
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True)
class RunningPod:
    """A pod bound to a node and not finished, as the rebalancer reads it."""

    facts: PodFacts
    record: PodRecord
    request: PodRequest
    scheduler: str
    uid: str


@dataclass
class ClusterState:
    """One round's view of the cluster."""

    nodes: list[NodeInfo]
    """Every node, with the requests of the pods bound to it."""
    capacity: np.ndarray
    """(n, N_FEATURES) each node's capacity in the pods' usage units: cores, bytes, then bytes/s."""
    link: np.ndarray
    """(n, 4) network and disk bandwidth, bytes/s (labels, else the normalisation's standard)."""
    pods: list[RunningPod]
    budgets: list[Budget]
    near: Neighbours

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def facts(pod: Mapping[str, Any], now: float) -> PodFacts:
    """What the eligibility rules read of a pod's JSON (drs_prom.moves.eligibility.PodFacts)."""
    meta = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    try:
        ref = controller_ref(pod)
    except ValueError:
        ref = None
    refs = meta.get("ownerReferences")
    controlled = [r for r in refs if isinstance(r, Mapping) and r.get("controller")] if isinstance(refs, list) else []
    started = kube_terms.start_time(pod)
    listed = spec.get("volumes")
    volumes: list[Any] = listed if isinstance(listed, list) else []
    priority = spec.get("priority")
    return PodFacts(
        key=f"{meta.get('namespace', 'default')}/{meta.get('name', '')}",
        namespace=str(meta.get("namespace") or "default"),
        node=str(spec.get("nodeName") or ""),
        owner_kind=ref[0] if ref is not None and controlled else "",
        owner=f"{meta.get('namespace', 'default')}/{top_owner(pod)}",
        age_seconds=max(0.0, now - started) if np.isfinite(started) else 0.0,
        priority=priority if type(priority) is int else 0,
        priority_class=str(spec.get("priorityClassName") or ""),
        local_storage=any(isinstance(v, Mapping) and "emptyDir" in v for v in volumes),
        mirror=MIRROR_ANNOTATION in _mapping(meta.get("annotations")),
        terminating=bool(meta.get("deletionTimestamp")),
    )


def node_capacity(node: Mapping[str, Any]) -> tuple[float, float]:
    """(cores, memory bytes) of a node's ``status.capacity`` (allocatable where capacity is absent)."""
    status = _mapping(node.get("status"))
    cap = _mapping(status.get("capacity")) or _mapping(status.get("allocatable"))
    return kube.cpu_millis(cap.get("cpu", 0)) / 1000.0, float(kube.mem_bytes(cap.get("memory", 0)))


def read_cluster(api: KubeClient, settings: Settings, now: float) -> ClusterState:
    """List nodes, pods and PodDisruptionBudgets once; ApiException when the apiserver cannot answer."""
    import orjson
    from kubernetes import client

    core = client.CoreV1Api(api)
    policy = client.PolicyV1Api(api)
    node_items = orjson.loads(drained(core.list_node(_preload_content=False))).get("items") or []
    pod_items = orjson.loads(drained(core.list_pod_for_all_namespaces(_preload_content=False))).get("items") or []
    pdbs = policy.list_pod_disruption_budget_for_all_namespaces(_preload_content=False)
    pdb_items = orjson.loads(drained(pdbs)).get("items") or []
    return build_state(node_items, pod_items, pdb_items, settings, now)


def build_state(
    node_items: Sequence[Mapping[str, Any]],
    pod_items: Sequence[Mapping[str, Any]],
    pdb_items: Sequence[Mapping[str, Any]],
    settings: Settings,
    now: float,
) -> ClusterState:
    """The round's view from the API's JSON (pure: the tests feed it literal objects)."""
    names = [str(_mapping(n.get("metadata")).get("name", "")) for n in node_items]
    index = {n: i for i, n in enumerate(names)}
    bound: dict[str, list[tuple[int, int]]] = {n: [] for n in names}
    pods: list[RunningPod] = []
    by_node: dict[str, list[PodRecord]] = {n: [] for n in names}
    for pod in pod_items:
        node = str(_mapping(pod.get("spec")).get("nodeName") or "")
        if node not in index or kube.is_terminal(pod):
            continue
        cpu, mem = kube.pod_requests(pod)
        bound[node].append((cpu, mem))
        record = kube.to_pod_record(pod, node)
        by_node[node].append(record)
        try:
            request = kube.to_pod_request(pod)
        except ValueError:
            continue
        pods.append(
            RunningPod(
                facts=facts(pod, now),
                record=record,
                request=request,
                scheduler=str(_mapping(pod.get("spec")).get("schedulerName") or DEFAULT_SCHEDULER),
                uid=str(_mapping(pod.get("metadata")).get("uid") or ""),
            )
        )
    nodes = [kube.to_node_info(n, bound[name]) for n, name in zip(node_items, names)]
    link, _ = link_capacity.matrix((name, nodes[i].labels) for i, name in enumerate(names))
    full = np.array(settings.normalisation.full_values, dtype=np.float64)[2:]
    link = np.where(np.isnan(link), full, link) if len(link) else np.zeros((0, N_FEATURES - 2))
    capacity = np.zeros((len(names), N_FEATURES))
    for i, n in enumerate(node_items):
        capacity[i, 0], capacity[i, 1] = node_capacity(n)
    capacity[:, 2:] = link
    return ClusterState(
        nodes=nodes,
        capacity=capacity,
        link=link,
        pods=pods,
        budgets=[kube_terms.to_budget(p) for p in pdb_items],
        near=Neighbours(pods_by_node=by_node),
    )


def blocked_by_budget(pod: RunningPod, budgets: Sequence[Budget]) -> bool:
    """Whether a PodDisruptionBudget covering the pod allows no disruption now (what the Eviction API would say)."""
    return any(b.covers(pod.record) and b.allowed <= 0 and pod.record.name not in b.disrupted for b in budgets)


class LivePlacer:
    """drs_prom.moves.plan's placer on the live cluster (module docstring)."""

    def __init__(
        self,
        state: ClusterState,
        settings: Settings,
        own: Policy,
        other: Policy,
        features: pd.DataFrame,
        prefer_not: frozenset[str] = frozenset(),
        now: float = 0.0,
    ) -> None:
        """``own``/``other``: what stands for drs-prom's scheduler and for any other one; ``features``: the nodes'
        signals now (a snapshot, as a scheduler deciding now would read them; a replacement's expected load is the
        pod's stored usage); ``prefer_not``: nodes carrying the rebalancer's PreferNoSchedule taint (either scheduler
        then prefers other nodes)."""
        self.state, self.settings, self.own, self.other = state, settings, own, other
        self.features, self.prefer_not, self.now = features, prefer_not, now
        self.by_key = {p.facts.key: p for p in state.pods}
        self.index = {n: i for i, n in enumerate(state.names)}

    def soft_terms(
        self, request: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours, mask: np.ndarray
    ) -> np.ndarray | None:
        """The score terms both schedulers add to their own scores (constraints.soft_terms: the pod's ScheduleAnyway
        spread over the placed pods ``near``, the nodes' PreferNoSchedule taints), the rebalancer's own taint among
        them even where the nodes were read before it set it; None when none applies."""
        key = self.settings.rebalance.taint_key
        at = np.flatnonzero(mask).tolist()
        extra = np.array(
            [nodes[i].name in self.prefer_not and all(t.key != key for t in nodes[i].taints) for i in at],
            dtype=np.int64,
        )
        return soft_terms.terms(request, nodes, at, mask, lambda: near, extra_taints=extra)

    def policy_for(self, pod: RunningPod) -> Policy:
        return self.own if pod.scheduler == self.settings.scheduler.scheduler_name else self.other

    def what_if(self, pod: RunningPod, planned: Sequence[Move]) -> tuple[list[NodeInfo], Neighbours]:
        """The nodes and placed pods with ``pod`` gone and the ``planned`` moves made (pods on their targets)."""
        nodes = list(self.state.nodes)
        placed = {k: list(v) for k, v in self.state.near.pods_by_node.items()}

        def take(p: RunningPod, node: str) -> None:
            i = self.index[node]
            nodes[i] = without_pods(nodes[i], [p.record])
            placed[node] = [r for r in placed.get(node, []) if r.uid != p.record.uid]

        for m in planned:
            other = self.by_key[m.pod.key]
            take(other, m.source)
            moved = dataclasses.replace(other.record, node=m.target)
            j = self.index[m.target]
            nodes[j] = with_pods(nodes[j], [moved])
            placed.setdefault(m.target, []).append(moved)
        take(pod, pod.facts.node)
        return nodes, dataclasses.replace(self.state.near, pods_by_node=placed)

    def __call__(self, candidate: Candidate, shares: np.ndarray, planned: Sequence[Move]) -> Placement:
        pod = self.by_key[candidate.facts.key]
        nodes, near = self.what_if(pod, planned)
        demand = tuple(float(x) for x in np.nan_to_num(candidate.usage, nan=0.0))
        request = dataclasses.replace(pod.request, demand=demand, demand_source="owner")
        mask = chain.filter_all(request, nodes, near).mask
        if not mask.any():
            return Placement(-1, mask)
        policy = self.policy_for(pod)
        norm = input_scales(policy, self.settings.normalisation)
        cap = self.state.capacity
        ctx = DecisionContext(
            pod=request,
            nodes=nodes,
            feasible=mask,
            load=node_matrix(self.features, norm, self.state.names),
            pod_load=pod_matrix(demand, cap[:, 0], cap[:, 1], norm),
            now=self.now,
            full=link_capacity.full_matrix(self.state.link, scales(norm)),
            soft_scores=self.soft_terms(request, nodes, near, mask),
        )
        node, _ = choose(policy, ctx, bind=False)
        return Placement(node, mask)
