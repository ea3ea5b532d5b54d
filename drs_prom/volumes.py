"""kube-scheduler's volume filters for claims that are already bound, as pure functions.

VolumeRestrictions (a ReadWriteOncePod claim another pod uses), VolumeBinding (the claims exist, none
is an unbound claim of an Immediate class, the bound PersistentVolume's required node affinity matches
the node) and VolumeZone (the volume's zone and region labels match the node's). A claim still waiting
for its first consumer (``WaitForFirstConsumer``) needs kube-scheduler's selected-node handshake, which
drs-prom's own scheduler does not do: such a pod is refused (``unsupported``), never bound on a guess.

Wording as kube-scheduler's: a PreFilter reason turns the pod away on every node at once; a Filter
reason is per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from drs_prom import filters
from drs_prom.types import ClaimInfo, NodeInfo, PodRequest, VolumeInfo

R_RWOP = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
R_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
R_NODE_CONFLICT = "node(s) had volume node affinity conflict"
R_PV_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
R_ZONE = "node(s) had no available volume zone"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
UNSUPPORTED_WFFC = "unbound WaitForFirstConsumer PersistentVolumeClaims (VolumeBinding)"

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
    """Claims by (namespace, name), volumes by name, each StorageClass's volumeBindingMode, and the
    claims placed pods mount (for ReadWriteOncePod)."""

    claims: Mapping[tuple[str, str], ClaimInfo]
    volumes: Mapping[str, VolumeInfo]
    binding_modes: Mapping[str, str]
    in_use: frozenset[tuple[str, str]] = frozenset()


NO_STORAGE = Storage(claims={}, volumes={}, binding_modes={})


@dataclass(frozen=True)
class VolumeState:
    """What PreFilter found: the bound volumes (and claims whose volume is missing) the nodes are checked against."""

    volumes: tuple[VolumeInfo, ...]
    missing_volume: bool


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
    if unbound:
        return UNSUPPORTED_WFFC, True
    volumes = [storage.volumes.get(c.volume_name) for c in found]
    return VolumeState(volumes=tuple(v for v in volumes if v is not None), missing_volume=None in volumes)


def reasons(state: VolumeState, node: NodeInfo) -> list[str]:
    """VolumeBinding then VolumeZone on one node."""
    if state.missing_volume:
        return [R_PV_MISSING]
    for v in state.volumes:
        if v.node_affinity is not None and not any(
            filters.term_matches(t, node.labels, node.name) for t in v.node_affinity
        ):
            return [R_NODE_CONFLICT]
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
