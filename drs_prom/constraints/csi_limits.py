"""NodeVolumeLimits for CSI volumes: how many volumes of each CSI driver a node may have attached, as pure functions.

A CSI driver's node plugin reports its attach limit in the node's CSINode object
(``spec.drivers[].allocatable.count``); kube-scheduler refuses a node when the pod's new volumes of a
driver plus those already there would exceed it ("node(s) exceed max volume count"). A volume is
named ``<driver>/<volume handle>`` so one that several pods share counts once. What is already
there: the volumes of the pods on the node (bound and assumed, found through their claims) and
the VolumeAttachments naming the node (a volume still attached after its pod left counts too).

As in kube-scheduler, a claim counts through its bound PersistentVolume's ``spec.csi``; an unbound
claim (or one whose volume is gone) counts as one new volume of its StorageClass's provisioner; a
claim without a class, or whose class or claim is missing, does not count, and neither does a
non-CSI volume. A node without a CSINode, or a driver without a count, has no limit. In-tree
volumes migrated to CSI (gcePersistentDisk, awsElasticBlockStore and the like, counted upstream
once the CSINode lists the plugin as migrated) are not counted here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from drs_prom.types import ClaimInfo, VolumeInfo

R_MAX_VOLUME_COUNT = "node(s) exceed max volume count"
UNBOUND_HANDLE = "~unbound-{namespace}/{name}"
"""The handle an unbound claim counts under: one volume per claim, the same for every pod using it."""


def claim_volume(
    claim: ClaimInfo, volumes: Mapping[str, VolumeInfo], provisioners: Mapping[str, str]
) -> tuple[str, str] | None:
    """(unique volume name, driver) of the CSI volume behind ``claim``; None when it does not count."""
    pv = volumes.get(claim.volume_name) if claim.volume_name else None
    if pv is not None:
        if not pv.csi_driver or not pv.csi_handle:
            return None  # a non-CSI volume: not NodeVolumeLimits' business
        return f"{pv.csi_driver}/{pv.csi_handle}", pv.csi_driver
    driver = provisioners.get(claim.storage_class, "") if claim.storage_class else ""
    if not driver:
        return None  # without a class the claim binds before scheduling (Immediate): nothing to count yet
    handle = UNBOUND_HANDLE.format(namespace=claim.namespace, name=claim.name)
    return f"{driver}/{handle}", driver


def pod_volumes(
    namespace: str,
    claim_names: Iterable[str],
    claims: Mapping[tuple[str, str], ClaimInfo],
    volumes: Mapping[str, VolumeInfo],
    provisioners: Mapping[str, str],
) -> dict[str, str]:
    """Unique volume name -> driver of a pod's CSI volumes (claims that are missing are skipped)."""
    out: dict[str, str] = {}
    for name in claim_names:
        claim = claims.get((namespace, name))
        found = claim_volume(claim, volumes, provisioners) if claim is not None else None
        if found is not None:
            out[found[0]] = found[1]
    return out


def exceeds(
    new: Mapping[str, str],
    limits: Mapping[str, int],
    pods: Iterable[tuple[str, Sequence[str]]],
    attached: Iterable[tuple[str, str]],
    claims: Mapping[tuple[str, str], ClaimInfo],
    volumes: Mapping[str, VolumeInfo],
    provisioners: Mapping[str, str],
) -> bool:
    """Whether the pod's ``new`` volumes break one of the node's ``limits`` (driver -> count).

    ``pods``: (namespace, claim names) of the pods on the node; ``attached``: (attacher, volume name)
    of the VolumeAttachments naming it."""
    if not new or not any(d in limits for d in new.values()):
        return False
    in_use: dict[str, str] = {}
    for namespace, names in pods:
        in_use.update(pod_volumes(namespace, names, claims, volumes, provisioners))
    count = Counter(in_use.values())
    for attacher, pv_name in attached:
        pv = volumes.get(pv_name)
        if not attacher or pv is None or not pv.csi_driver:
            continue
        if f"{attacher}/{pv.csi_handle}" not in in_use:  # attached and no pod mounts it: it still counts
            count[attacher] += 1
    wanted = Counter(d for u, d in new.items() if u not in in_use)
    return any(d in limits and count[d] + n > limits[d] for d, n in wanted.items())
