"""PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and VolumeAttachments as the
volume filters read them: the REST API's JSON (camelCase dicts) in, ``types`` records or plain tuples out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drs_prom.scheduler.watch import kube, kube_terms
from drs_prom.types import ClaimInfo, Json, NodeSelectorRequirement, NodeSelectorTerm, VolumeInfo

_mapping, _list, _text = kube_terms.as_mapping, kube_terms.as_list, kube_terms.as_text

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""The claim annotation that asks a provisioner for a volume reachable from that node."""
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
"""The claim annotation the PV controller sets once it has bound the claim."""


def to_claim_info(pvc: Mapping[str, Any]) -> ClaimInfo:
    """A PersistentVolumeClaim object as the volume filters read it."""
    meta, spec = _mapping(pvc.get("metadata")), _mapping(pvc.get("spec"))
    annotations = _mapping(meta.get("annotations"))
    selector = spec.get("selector")
    return ClaimInfo(
        namespace=_text(meta.get("namespace"), "default"),
        name=_text(meta.get("name")),
        volume_name=_text(spec.get("volumeName")),
        storage_class=_text(spec.get("storageClassName")),
        access_modes=tuple(m for m in _list(spec.get("accessModes")) if isinstance(m, str)),
        deleting=bool(meta.get("deletionTimestamp")),
        uid=_text(meta.get("uid")),
        request_bytes=_storage_bytes(_mapping(_mapping(spec.get("resources")).get("requests")).get("storage")),
        selector=kube_terms.label_selector(selector) if isinstance(selector, Mapping) else None,
        volume_mode=_text(spec.get("volumeMode"), "Filesystem"),
        selected_node=_text(annotations.get(ANN_SELECTED_NODE)),
        bind_completed=ANN_BIND_COMPLETED in annotations,
    )


def _storage_bytes(q: Json) -> int:
    """A storage quantity in bytes (0 when absent or unreadable: the apiserver validated it already)."""
    try:
        return kube.mem_bytes(q) if q is not None else 0
    except (ValueError, ArithmeticError):
        return 0


def to_volume_info(pv: Mapping[str, Any]) -> VolumeInfo:
    """A PersistentVolume: required node affinity (None when it has none), labels, and what matching it
    to an unbound claim reads (class, access modes, capacity, phase, volume mode, claimRef)."""
    meta, spec = _mapping(pv.get("metadata")), _mapping(pv.get("spec"))
    required = _mapping(spec.get("nodeAffinity")).get("required")
    terms = None
    if isinstance(required, Mapping):
        terms = tuple(
            NodeSelectorTerm(
                match_expressions=kube.node_requirements(t.get("matchExpressions")),
                match_fields=kube.node_requirements(t.get("matchFields")),
            )
            for t in map(_mapping, _list(required.get("nodeSelectorTerms")))
        )
    csi = _mapping(spec.get("csi"))
    ref = _mapping(spec.get("claimRef"))
    return VolumeInfo(
        name=_text(meta.get("name")),
        node_affinity=terms,
        labels=tuple(sorted(kube.labels_of(meta.get("labels")).items())),
        csi_driver=_text(csi.get("driver")),
        csi_handle=_text(csi.get("volumeHandle")),
        storage_class=_text(spec.get("storageClassName")),
        access_modes=tuple(m for m in _list(spec.get("accessModes")) if isinstance(m, str)),
        capacity_bytes=_storage_bytes(_mapping(spec.get("capacity")).get("storage")),
        phase=_text(_mapping(pv.get("status")).get("phase")),
        volume_mode=_text(spec.get("volumeMode"), "Filesystem"),
        claim_ref=(_text(ref.get("namespace")), _text(ref.get("name")), _text(ref.get("uid"))) if ref else (),
    )


def binding_mode(sc: Mapping[str, Any]) -> tuple[str, str]:
    """(StorageClass name, volumeBindingMode); the apiserver defaults the mode to Immediate."""
    return _text(_mapping(sc.get("metadata")).get("name")), _text(sc.get("volumeBindingMode"), "Immediate")


def storage_class(sc: Mapping[str, Any]) -> tuple[str, tuple[str, str]]:
    """(StorageClass name, (volumeBindingMode, provisioner)): the mode for VolumeBinding, the provisioner
    for NodeVolumeLimits (an unbound claim counts against its class's provisioner's limit)."""
    name, mode = binding_mode(sc)
    return name, (mode, _text(sc.get("provisioner")))


def allowed_topologies(sc: Mapping[str, Any]) -> tuple[str, tuple[NodeSelectorTerm, ...]]:
    """(StorageClass name, its allowedTopologies as node selector terms): where its provisioner may
    create a volume (no terms: anywhere). Each term's expressions are ``key In values``."""
    terms = tuple(
        NodeSelectorTerm(
            match_expressions=tuple(
                NodeSelectorRequirement(
                    key=_text(e.get("key")), operator="In", values=tuple(_text(v) for v in _list(e.get("values")))
                )
                for e in map(_mapping, _list(t.get("matchLabelExpressions")))
            )
        )
        for t in map(_mapping, _list(sc.get("allowedTopologies")))
    )
    return _text(_mapping(sc.get("metadata")).get("name")), terms


def csi_node_limits(csi_node: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """(node name, driver -> attach limit) of a CSINode; a driver without ``allocatable.count`` has no limit."""
    limits: dict[str, int] = {}
    for d in map(_mapping, _list(_mapping(csi_node.get("spec")).get("drivers"))):
        count = _mapping(d.get("allocatable")).get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            limits[_text(d.get("name"))] = count
    return _text(_mapping(csi_node.get("metadata")).get("name")), limits


def volume_attachment(va: Mapping[str, Any]) -> tuple[str, tuple[str, str, str]]:
    """(VolumeAttachment name, (node, attacher, PersistentVolume name)): a volume attached to a node
    counts against its driver's limit there even when no pod mounts it any more."""
    spec = _mapping(va.get("spec"))
    pv = _text(_mapping(spec.get("source")).get("persistentVolumeName"))
    return _text(_mapping(va.get("metadata")).get("name")), (
        _text(spec.get("nodeName")),
        _text(spec.get("attacher")),
        pv,
    )
