"""kube-scheduler's volume filters, as pure functions.

VolumeRestrictions (a ReadWriteOncePod claim another pod uses), NodeVolumeLimits (CSI attach limits,
counted by ``csi_limits``), VolumeBinding (the claims exist, none is an unbound claim of an Immediate
class, the bound PersistentVolume's required node affinity matches the node) and VolumeZone (the
volume's zone and region labels match the node's). A claim still waiting for its first consumer
(``WaitForFirstConsumer``) passes a node when a free volume there or a provisioner allowed there
can satisfy it (``claim_binding``); the binding cycle then writes that choice and waits for the claim
to bind before it binds the pod.

Wording as kube-scheduler's: a PreFilter reason turns the pod away on every node at once; a Filter
reason is per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from drs_prom.constraints import claim_binding, csi_limits
from drs_prom.types import ClaimInfo, NodeInfo, NodeSelectorTerm, PodRecord, PodRequest, VolumeInfo

R_RWOP = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
R_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
R_NODE_CONFLICT = "node(s) had volume node affinity conflict"
R_PV_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
R_ZONE = "node(s) had no available volume zone"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

_ZONE_LABELS = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
_GA = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


@dataclass(frozen=True)
class Storage:
    """Claims by (namespace, name), volumes by name, each StorageClass's volumeBindingMode, the
    claims placed pods mount (for ReadWriteOncePod), and for NodeVolumeLimits each class's
    provisioner, each node's CSI attach limits (node -> driver -> count) and the volumes attached
    to it (node -> (attacher, PersistentVolume name) of each VolumeAttachment); for claims waiting for
    their first consumer each class's allowedTopologies and the volumes in-flight bindings reserved
    (volume -> (namespace, claim))."""

    claims: Mapping[tuple[str, str], ClaimInfo]
    volumes: Mapping[str, VolumeInfo]
    binding_modes: Mapping[str, str]
    in_use: frozenset[tuple[str, str]] = frozenset()
    provisioners: Mapping[str, str] = field(default_factory=dict)
    csi_limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    attached: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    topologies: Mapping[str, tuple[NodeSelectorTerm, ...]] = field(default_factory=dict)
    reserved: Mapping[str, tuple[str, str]] = field(default_factory=dict)


NO_STORAGE = Storage(claims={}, volumes={}, binding_modes={})


@dataclass(frozen=True)
class VolumeState:
    """What PreFilter found: the bound volumes (and claims whose volume is missing) the nodes are checked
    against, the pod's CSI volumes (unique name -> driver) with the storage NodeVolumeLimits reads, and
    the claims waiting for their first consumer with the volumes each could take."""

    volumes: tuple[VolumeInfo, ...]
    missing_volume: bool
    csi: Mapping[str, str] = field(default_factory=dict)
    storage: Storage = NO_STORAGE
    pending: tuple[claim_binding.Pending, ...] = ()


def attached_by_node(attachments: Iterable[tuple[str, str, str]]) -> dict[str, tuple[tuple[str, str], ...]]:
    """VolumeAttachments as (node, attacher, volume name) -> node -> ((attacher, volume name), ...)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for node, attacher, pv in attachments:
        out.setdefault(node, []).append((attacher, pv))
    return {n: tuple(v) for n, v in out.items()}


def claims_in_use(pods: Iterable[tuple[str, tuple[str, ...]]]) -> frozenset[tuple[str, str]]:
    """(namespace, claim) of every claim the given (namespace, claims) pods mount."""
    return frozenset((ns, c) for ns, claims in pods for c in claims)


def prefilter(pod: PodRequest, storage: Storage) -> tuple[str, bool] | VolumeState:
    """(reason, unsupported) when the pod is turned away on every node (``unsupported``: drs-prom cannot
    decide it; otherwise kube-scheduler's own PreFilter reason); else the state each node's check reads."""
    found: list[ClaimInfo] = []
    for name in pod.claims:  # VolumeRestrictions reads the claims first: a missing one stops it
        claim = storage.claims.get((pod.namespace, name))
        if claim is None:
            return f'persistentvolumeclaim "{name}" not found', False
        found.append(claim)
    for claim in found:
        if "ReadWriteOncePod" in claim.access_modes and (claim.namespace, claim.name) in storage.in_use:
            return R_RWOP, False
    for claim in found:  # VolumeBinding
        if claim.deleting:
            return f'persistentvolumeclaim "{claim.name}" is being deleted', False
    unbound = [c for c in found if not c.volume_name]
    if any(storage.binding_modes.get(c.storage_class) != WAIT_FOR_FIRST_CONSUMER for c in unbound):
        return R_UNBOUND_IMMEDIATE, False
    volumes = [storage.volumes.get(c.volume_name) for c in found if c.volume_name]
    csi = {}
    if storage.csi_limits:  # no node has a limit: nothing to count
        csi = csi_limits.pod_volumes(pod.namespace, pod.claims, storage.claims, storage.volumes, storage.provisioners)
    return VolumeState(
        volumes=tuple(v for v in volumes if v is not None),
        missing_volume=None in volumes,
        csi=csi,
        storage=storage,
        pending=claim_binding.prepare(unbound, storage.volumes, storage.reserved) if unbound else (),
    )


def binding_plan(state: VolumeState, node: NodeInfo) -> claim_binding.Plan | str:
    """How the pod's claims waiting for their first consumer would bind on ``node`` (a reason if not)."""
    s = state.storage
    return claim_binding.plan(state.pending, node, s.provisioners, s.topologies)


def limit_reason(state: VolumeState, node: NodeInfo, pods: Sequence[PodRecord]) -> str | None:
    """NodeVolumeLimits on one node, ``pods`` being the pods placed there."""
    s = state.storage
    limits = s.csi_limits.get(node.name)
    if not state.csi or not limits:
        return None
    placed = ((p.namespace, p.claims) for p in pods if p.claims)
    hit = csi_limits.exceeds(
        state.csi, limits, placed, s.attached.get(node.name, ()), s.claims, s.volumes, s.provisioners
    )
    return csi_limits.R_MAX_VOLUME_COUNT if hit else None


def reasons(state: VolumeState, node: NodeInfo, pods: Sequence[PodRecord] = ()) -> list[str]:
    """NodeVolumeLimits, VolumeBinding then VolumeZone on one node (``pods``: those placed there)."""
    over = limit_reason(state, node, pods)
    if over:
        return [over]
    if state.missing_volume:
        return [R_PV_MISSING]
    binding = [R_NODE_CONFLICT] if not all(claim_binding.admits(v, node) for v in state.volumes) else []
    if state.pending and isinstance(why := binding_plan(state, node), str):
        binding.append(why)
    if binding:
        return binding
    if not any(k in node.labels for k in _ZONE_LABELS):
        return []  # a node without zone labels takes any volume
    for v in state.volumes:
        for key, value in v.labels:
            if key not in _ZONE_LABELS:
                continue
            have = node.labels.get(key, node.labels.get(_GA.get(key, "")))
            if have is None or have not in set(value.split("__")):
                return [R_ZONE]
    return []
