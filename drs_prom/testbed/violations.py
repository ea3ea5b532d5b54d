"""Hard-constraint violations of a finished run, counted from what the apiserver holds: the run's pods (their node,
their spec as the scheduler saw it, and the twin kubelet's start and finish instants) and the nodes.

A scheduler is judged on what it bound, never on its own account of it. A pod occupies its node from
``drs.io/started-at`` (the twin kubelet admitted it, right after the bind) until ``drs.io/finished-at`` (or the end
of the run); two pods are together on a node when those intervals overlap. Counted:

* ``anti_affinity``: pairs of pods together in one topology domain while one's required anti-affinity term selects
  the other (kube-scheduler's InterPodAffinity refuses the second);
* ``spread``: pods that started in a domain where, counting the matching pods then running on the nodes the pod
  may use, the skew exceeded the constraint's maxSkew (PodTopologySpread with DoNotSchedule). A pod that has
  finished stays in a scheduler's view until its kubelet's Succeeded status reaches the apiserver (seconds later
  on a loaded host), and the pod itself was decided before its start (the bind, then the twin kubelet's
  reaction). A scheduler deciding on such a view is right, so the skew is taken in the most lenient view of the
  ``DECISION_WINDOW`` seconds before the pod started: in the other domains a pod counts if it ran at some
  instant of that window, a finished one until its last status write (``managedFields``, 1 s resolution: up to
  1 s more); in the pod's own domain only pods running throughout it. What is counted is a skew no recent view
  of the cluster could allow;
* ``extended``: pods started on a node whose extended resources (``vendor/name``, e.g. nvidia.com/gpu) the pods
  running there already held, and pods the node's kubelet rejected for one (NodeResourcesFit);
* ``host_ports``: pairs of pods together on a node asking for the same host port (NodePorts).
* ``volume_zone``: pods that ran on a node their bound PersistentVolume excludes, by its required node affinity or
  its zone label (VolumeBinding, VolumeZone), read from the run's claims and volumes.

Every count is 0 for a scheduler that honours kube-scheduler's filters. Parsing is the scheduler's own
(``kube.to_pod_request``), the semantics kube-scheduler's (tested in tests/differential against it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from drs_prom.constraints import matching, volumes
from drs_prom.constraints.plugins import node_affinity, node_ports, taint_toleration
from drs_prom.scheduler.watch import kube, kube_storage
from drs_prom.testbed.kubelet import FINISHED_ANNOTATION, STARTED_ANNOTATION
from drs_prom.types import NodeInfo, PodRequest

DECISION_WINDOW = 1.0
"""Seconds before a pod's start (the twin kubelet's admission) in which its scheduler may have decided it."""


@dataclass(frozen=True)
class Violations:
    anti_affinity: int = 0
    spread: int = 0
    extended: int = 0
    host_ports: int = 0
    volume_zone: int = 0

    @property
    def total(self) -> int:
        return self.anti_affinity + self.spread + self.extended + self.host_ports + self.volume_zone

    def by_kind(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class _Placed:
    """A pod that ran: where, from when to when, and its constraints as the scheduler parsed them."""

    req: PodRequest
    node: str
    start: float
    end: float  # inf while still running at the end of the run
    seen_until: float  # the latest instant a scheduler may still have seen it running (>= end)

    def overlaps(self, other: _Placed) -> bool:
        return self.start < other.end and other.start < self.end


def _placed(pod: Mapping[str, Any]) -> _Placed | None:
    node = (pod.get("spec") or {}).get("nodeName")
    ann = pod["metadata"].get("annotations") or {}
    if not node or STARTED_ANNOTATION not in ann:
        return None
    end = float(ann[FINISHED_ANNOTATION]) if FINISHED_ANNOTATION in ann else math.inf
    return _Placed(kube.to_pod_request(pod), node, float(ann[STARTED_ANNOTATION]), end, max(end, _status_written(pod)))


def _status_written(pod: Mapping[str, Any]) -> float:
    """An upper bound of the instant the pod's last status write reached the apiserver (managedFields' times are
    whole seconds, rounded down), or -inf when none is recorded."""
    times = [
        f["time"]
        for f in pod["metadata"].get("managedFields") or []
        if f.get("subresource") == "status" and f.get("time")
    ]
    if not times:
        return -math.inf
    last = max(datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times)
    return last + 1.0


def _extended(name: str) -> bool:
    return "/" in name and not name.startswith("hugepages-")


def _rejected_for_extended(pod: Mapping[str, Any]) -> bool:
    """Bound, then rejected by its node's kubelet for an extended resource (the twin kubelet's OutOfResources)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Failed" or not (pod.get("spec") or {}).get("nodeName"):
        return False
    words = str(status.get("message", "")).replace(";", " ").replace(",", " ").split()
    return any(w == "Insufficient" and i + 1 < len(words) and _extended(words[i + 1]) for i, w in enumerate(words))


def _matches(term_selector: Any, namespaces: frozenset[str], owner_ns: str, other: PodRequest) -> bool:
    in_ns = other.namespace in (namespaces or {owner_ns})
    return in_ns and matching.selector_matches(term_selector, other.labels)


def count(
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]] = (),
    pvs: Sequence[Mapping[str, Any]] = (),
) -> Violations:
    """The violations of one run (module docstring); ``pods``, ``nodes``, the run's PersistentVolumeClaims and
    PersistentVolumes as the apiserver lists them."""
    infos = {n["metadata"]["name"]: kube.to_node_info(n) for n in nodes}
    placed = [p for p in map(_placed, pods) if p is not None and p.node in infos]
    by_node: dict[str, list[_Placed]] = {}
    for p in placed:
        by_node.setdefault(p.node, []).append(p)

    anti: set[frozenset[str]] = set()
    for p in placed:
        for term in p.req.pod_anti_affinity:
            domain = infos[p.node].labels.get(term.topology_key)
            if domain is None:
                continue
            for q in placed:
                if q is p or not p.overlaps(q) or infos[q.node].labels.get(term.topology_key) != domain:
                    continue
                if _matches(term.selector, term.namespaces, p.req.namespace, q.req):
                    anti.add(frozenset((p.req.uid or p.req.name, q.req.uid or q.req.name)))

    ports: set[frozenset[str]] = set()
    for mates in by_node.values():
        with_ports = [p for p in mates if p.req.ports]
        for i, p in enumerate(with_ports):
            for q in with_ports[i + 1 :]:
                if p.overlaps(q) and node_ports.ports_conflict(p.req.ports, q.req.ports):
                    ports.add(frozenset((p.req.uid or p.req.name, q.req.uid or q.req.name)))

    spread = sum(1 for p in placed if _spread_violated(p, placed, infos))
    extended = sum(1 for p in placed if _over_extended(p, by_node[p.node], infos[p.node]))
    extended += sum(1 for pod in pods if _rejected_for_extended(pod))
    storage = volumes.Storage(
        claims={(c.namespace, c.name): c for c in map(kube_storage.to_claim_info, claims)},
        volumes={v.name: v for v in map(kube_storage.to_volume_info, pvs)},
        binding_modes={},
    )
    zone = sum(1 for p in placed if p.req.claims and _outside_volume_zone(p, infos[p.node], storage))
    return Violations(
        anti_affinity=len(anti), spread=spread, extended=extended, host_ports=len(ports), volume_zone=zone
    )


def _outside_volume_zone(p: _Placed, node: NodeInfo, storage: volumes.Storage) -> bool:
    """Whether a bound volume of ``p`` excludes the node it ran on (its node affinity or zone label)."""
    state = volumes.prefilter(p.req, storage)
    if isinstance(state, tuple):  # a claim or volume gone: nothing to hold against the placement
        return False
    return bool({volumes.R_NODE_CONFLICT, volumes.R_ZONE} & set(volumes.reasons(state, node)))


def _spread_violated(p: _Placed, placed: Sequence[_Placed], infos: Mapping[str, NodeInfo]) -> bool:
    """Whether ``p`` started where one of its DoNotSchedule constraints' skew went over maxSkew."""
    for c in p.req.spread:
        eligible = {
            name: info.labels[c.topology_key]
            for name, info in infos.items()
            if c.topology_key in info.labels
            and (c.node_affinity_policy == "Ignore" or node_affinity.matches_node_affinity(p.req, info))
            and (c.node_taints_policy == "Ignore" or taint_toleration.untolerated_taint(p.req, info) is None)
        }
        if p.node not in eligible:
            continue
        counts = dict.fromkeys(eligible.values(), 0)
        mine = eligible[p.node]
        for q in placed:
            if q is p or q.node not in eligible or q.req.namespace != p.req.namespace:
                continue
            if eligible[q.node] == mine:  # the most lenient view (module docstring)
                counted = q.start < p.start - DECISION_WINDOW and p.start < q.end
            else:
                counted = q.start < p.start and p.start - DECISION_WINDOW < q.seen_until
            if counted and matching.selector_matches(c.selector, q.req.labels):
                counts[eligible[q.node]] += 1
        own = 1 if matching.selector_matches(c.selector, p.req.labels) else 0
        if counts[mine] + own - min(counts.values()) > c.max_skew:
            return True
    return False


def _over_extended(p: _Placed, mates: Sequence[_Placed], node: NodeInfo) -> bool:
    """Whether ``p`` started on ``node`` when the pods running there (``p`` included) held more of an extended
    resource than the node offers."""
    wanted = {k: v for k, v in p.req.scalar if _extended(k) and v > 0}
    if not wanted:
        return False
    held = dict.fromkeys(wanted, 0)
    for q in mates:
        if q is p or q.start < p.start < q.end:
            for k, v in q.req.scalar:
                if k in held:
                    held[k] += v
    return any(held[k] > node.allocatable_scalar.get(k, 0) for k in held)
