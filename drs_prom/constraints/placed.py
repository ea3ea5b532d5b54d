"""The pods already placed, as the filters that read them see them: by node, with the namespaces' labels and the
storage objects (``Neighbours``), and the records a placed pod adds to a node.

The live scheduler builds it from its watch cache (bound and assumed pods), the simulator from its running pods,
the feasibility check from the API's JSON; the filters of the chain never know which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from drs_prom.constraints import volumes
from drs_prom.types import NodeInfo, PodRecord, PodRequest


@dataclass(frozen=True)
class Neighbours:
    """The pods on each node (bound and assumed) and the labels of every namespace."""

    pods_by_node: Mapping[str, Sequence[PodRecord]] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    storage: volumes.Storage = volumes.NO_STORAGE

    def has_anti_affinity(self) -> bool:
        return any(p.anti_affinity for pods in self.pods_by_node.values() for p in pods)


EMPTY = Neighbours()


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
