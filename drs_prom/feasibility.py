"""Which nodes may take a pod, from the Kubernetes objects themselves (REST JSON, camelCase).

``feasible_nodes`` is the one entry point the differential test against kube-scheduler calls:
every node maps to its filter reasons, an empty tuple meaning the pod fits there. Today it reads
what ``drs_prom.filters`` covers (NodeUnschedulable, TaintToleration, NodeAffinity and
NodeResourcesFit for cpu, memory and pod count) through the scheduler's own JSON parsing, so the
test measures the filters the scheduler runs. The keyword arguments name the objects the other
filters of kube-scheduler's default profile need (namespaces for namespaceSelector, claims,
volumes and storage classes); they are accepted and not read yet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from drs_prom import filters
from drs_prom.scheduler import kube


def feasible_nodes(
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    *,
    namespaces: Sequence[Mapping[str, Any]] = (),
    pvcs: Sequence[Mapping[str, Any]] = (),
    pvs: Sequence[Mapping[str, Any]] = (),
    storage_classes: Sequence[Mapping[str, Any]] = (),
) -> dict[str, tuple[str, ...]]:
    """Node name -> why ``pod`` cannot go there (empty: it can), given the pods already bound.

    ``pods`` may hold any pods: those without ``spec.nodeName`` or in a terminal phase take no
    room, as in kube-scheduler's cache.
    """
    bound: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for other in pods:
        node_name = (other.get("spec") or {}).get("nodeName")
        if node_name and not kube.is_terminal(other):
            bound[node_name].append(kube.pod_requests(other))
    request = kube.to_pod_request(pod)
    out: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        info = kube.to_node_info(node, bound.get((node.get("metadata") or {}).get("name", ""), ()))
        out[info.name] = tuple(filters.check(request, info))
    return out
