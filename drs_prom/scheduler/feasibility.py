"""Which nodes may take a pod, from the Kubernetes objects alone: the scheduler's filters as one call.

``feasible_nodes`` takes the JSON the REST API returns (camelCase dicts) and answers, for every node,
the reasons kube-scheduler's default profile would give (an empty tuple: the node is feasible). It
parses with the live scheduler's own parser (``scheduler.kube``) and filters with its own chain
(``chain.filter_all``), so agreeing with kube-scheduler here means the scheduler agrees too; a test
can put it beside kube-scheduler's answer for the same cluster state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drs_prom.constraints import chain, placed, preemption, volumes
from drs_prom.scheduler.watch import kube, kube_storage, kube_terms
from drs_prom.types import PodRecord


def neighbours(
    pods: Sequence[Mapping[str, Any]],
    namespaces: Sequence[Mapping[str, Any]],
    node_names: set[str],
    pvcs: Sequence[Mapping[str, Any]] = (),
    pvs: Sequence[Mapping[str, Any]] = (),
    storage_classes: Sequence[Mapping[str, Any]] = (),
    csi_nodes: Sequence[Mapping[str, Any]] = (),
    volume_attachments: Sequence[Mapping[str, Any]] = (),
) -> placed.Neighbours:
    """Placed pods by node (pods not yet bound, finished ones and pods on unknown nodes aside), the
    labels of each namespace, and the claims, volumes, storage classes, CSINodes and VolumeAttachments."""
    by_node: dict[str, list[PodRecord]] = {}
    for pod in pods:
        node = ((pod.get("spec") or {}).get("nodeName")) or ""
        if not node or node not in node_names or kube.is_terminal(pod):
            continue
        by_node.setdefault(node, []).append(kube.to_pod_record(pod, node))
    ns_labels = dict(kube.namespace_labels(ns) for ns in namespaces)
    claims = [kube_storage.to_claim_info(c) for c in pvcs]
    classes = dict(map(kube_storage.storage_class, storage_classes))
    topologies = dict(map(kube_storage.allowed_topologies, storage_classes))
    storage = volumes.Storage(
        claims={(c.namespace, c.name): c for c in claims},
        volumes={v.name: v for v in map(kube_storage.to_volume_info, pvs)},
        binding_modes={name: mode for name, (mode, _) in classes.items()},
        in_use=volumes.claims_in_use((r.namespace, r.claims) for rs in by_node.values() for r in rs),
        provisioners={name: prov for name, (_, prov) in classes.items()},
        csi_limits=dict(map(kube_storage.csi_node_limits, csi_nodes)),
        attached=volumes.attached_by_node(dict(map(kube_storage.volume_attachment, volume_attachments)).values()),
        topologies={name: terms for name, terms in topologies.items() if terms},
    )
    return placed.Neighbours(pods_by_node=by_node, namespace_labels=ns_labels, storage=storage)


def feasible_nodes(
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    *,
    namespaces: Sequence[Mapping[str, Any]] = (),
    pvcs: Sequence[Mapping[str, Any]] = (),
    pvs: Sequence[Mapping[str, Any]] = (),
    storage_classes: Sequence[Mapping[str, Any]] = (),
    csi_nodes: Sequence[Mapping[str, Any]] = (),
    volume_attachments: Sequence[Mapping[str, Any]] = (),
) -> dict[str, tuple[str, ...]]:
    """Node name -> why ``pod`` cannot go there (empty tuple: it can), for every node in ``nodes``.

    ``pods`` are all pods of the cluster: those bound to a node count there (Succeeded and Failed
    ones do not, as in kube-scheduler). ``pvcs``, ``pvs`` and ``storage_classes`` feed the volume
    filters (a claim waiting for its first consumer passes a node where a free volume or its class's
    provisioner can satisfy it), ``csi_nodes`` and ``volume_attachments`` NodeVolumeLimits; a pod with
    a DynamicResources claim is refused on every node with a reason saying so (never placed on a guess).
    ValueError (one line) when ``pod`` or a node is not a JSON object.
    """
    req = kube.to_pod_request(pod)
    infos = [kube.to_node_info(n) for n in nodes]
    near = neighbours(
        pods, namespaces, {i.name for i in infos}, pvcs, pvs, storage_classes, csi_nodes, volume_attachments
    )
    infos = [placed.with_pods(i, near.pods_by_node.get(i.name, ())) for i in infos]
    result = chain.filter_all(req, infos, near)
    return {info.name: reasons for info, reasons in zip(infos, result.reasons)}


def preemption_candidates(
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    pdbs: Sequence[Mapping[str, Any]] = (),
    *,
    namespaces: Sequence[Mapping[str, Any]] = (),
    pvcs: Sequence[Mapping[str, Any]] = (),
    pvs: Sequence[Mapping[str, Any]] = (),
    storage_classes: Sequence[Mapping[str, Any]] = (),
) -> list[preemption.Candidate]:
    """Every node where kube-scheduler's DefaultPreemption could make room for ``pod`` on this state, with its
    victims; empty when the pod fits somewhere or no eviction can make room (``preemption.best`` picks
    among them). Same inputs as ``feasible_nodes``, plus the PodDisruptionBudgets."""
    req = kube.to_pod_request(pod)
    infos = [kube.to_node_info(n) for n in nodes]
    near = neighbours(pods, namespaces, {i.name for i in infos}, pvcs, pvs, storage_classes)
    infos = [placed.with_pods(i, near.pods_by_node.get(i.name, ())) for i in infos]
    result = chain.filter_all(req, infos, near)
    if result.mask.any() or result.prefilter:
        return []
    budgets = [kube_terms.to_budget(p) for p in pdbs]
    return preemption.find_candidates(req, infos, near, result, budgets)
