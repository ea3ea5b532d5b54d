"""The bound volume of each pod of a ``volume_zones`` profile, as the volume filters read it.

A stateful replica's PersistentVolume lives in one zone (a cloud disk), so the pod may run only on nodes of that
zone: kube-scheduler's VolumeBinding (the PV's required node affinity) and VolumeZone (its zone label) say so.
The simulator hands the live scheduler's own volume filters (``drs_prom.constraints.volumes``) a ``Storage`` holding every
such pod's claim and volume, so the same code decides in bench, training and production; the testbed's driver
creates the same objects on the apiserver (``testbed.zonal_claims``).
"""

from __future__ import annotations

from drs_prom.constraints.volumes import NO_STORAGE, Storage
from drs_prom.sim.placement import ZONE_LABEL, claim_name
from drs_prom.sim.workload import Workload
from drs_prom.types import ClaimInfo, NodeSelectorRequirement, NodeSelectorTerm, VolumeInfo

STORAGE_CLASS = "drs-zonal"
"""storageClassName of the claims and volumes (already bound to each other, so no provisioner reads it)."""

ACCESS_MODE = "ReadWriteOnce"
CAPACITY_BYTES = 1 << 30
"""Each claim's request and its volume's capacity (1Gi)."""


def volume_name(namespace: str, pod: str) -> str:
    """Its PersistentVolume: cluster-scoped, so the namespace is part of the name."""
    return f"{namespace}-{pod}-data"


def pod_volume(namespace: str, pod: str, zone: str) -> tuple[ClaimInfo, VolumeInfo]:
    """The claim of ``pod`` bound to a volume in ``zone``: node affinity ``zone In (zone)`` and the zone label, as
    a cloud provider's zonal disk carries both."""
    pv = volume_name(namespace, pod)
    claim = ClaimInfo(
        namespace,
        claim_name(pod),
        volume_name=pv,
        storage_class=STORAGE_CLASS,
        access_modes=(ACCESS_MODE,),
        request_bytes=CAPACITY_BYTES,
        bind_completed=True,  # bound, as the PV controller leaves a pair (the testbed's driver writes it so)
    )
    term = NodeSelectorTerm((NodeSelectorRequirement(ZONE_LABEL, "In", (zone,)),))
    volume = VolumeInfo(
        pv,
        node_affinity=(term,),
        labels=((ZONE_LABEL, zone),),
        storage_class=STORAGE_CLASS,
        access_modes=(ACCESS_MODE,),
        capacity_bytes=CAPACITY_BYTES,
        claim_ref=(namespace, claim.name, ""),  # the claim's uid exists only once the apiserver has created it
    )
    return claim, volume


def workload_storage(workload: Workload, namespace: str = "default") -> Storage:
    """Every claim and volume of ``workload``'s pods (``NO_STORAGE`` when none has a volume)."""
    zones = workload.volume_zone
    if zones is None or not any(zones):
        return NO_STORAGE
    pairs = [pod_volume(namespace, name, zone) for name, zone in zip(workload.names, zones) if zone]
    return Storage(
        claims={(c.namespace, c.name): c for c, _ in pairs},
        volumes={v.name: v for _, v in pairs},
        binding_modes={},
    )
