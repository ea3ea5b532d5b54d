"""The Kubernetes objects of a ``volume_zones`` pod's volume: a PersistentVolume in one zone and the claim bound to it.

The pair is created already bound, as the PV controller leaves it after binding: the claim names its volume
(``spec.volumeName``) and carries ``pv.kubernetes.io/bind-completed`` (what kube-scheduler's VolumeBinding reads
as bound), the volume names its claim and the claim's uid (``spec.claimRef``, so it is created after the claim). So no provisioner and no controller are needed, and
a real kube-controller-manager finds nothing to change. The volume states its zone both as required node affinity
(VolumeBinding) and as the ``topology.kubernetes.io/zone`` label (VolumeZone), as a cloud provider's zonal disk
does; ``kube_storage.to_claim_info`` / ``kube_storage.to_volume_info`` read them back as ``sim.zonal_volumes.pod_volume`` says.

PersistentVolumes are cluster-scoped, so they are named after the run's namespace and labelled with the run
(``RUN_LABEL``), and the run deletes them at its end (``delete_run_volumes``).
"""

from __future__ import annotations

from typing import Any

from drs_prom.scheduler.write.kube_response import drained
from drs_prom.sim.placement import ZONE_LABEL, claim_name
from drs_prom.sim.workload import Workload
from drs_prom.sim.zonal_volumes import ACCESS_MODE, CAPACITY_BYTES, STORAGE_CLASS, volume_name

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
CAPACITY = f"{CAPACITY_BYTES >> 30}Gi"
VOLUME = "data"
"""The pod's volume (and mount) name for its claim."""


def manifests(
    wl: Workload, i: int, namespace: str, run_label: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(PersistentVolume, PersistentVolumeClaim) of workload row ``i``, or None when its profile has no volume."""
    zone = wl.volume_zone[i] if wl.volume_zone is not None else ""
    if not zone:
        return None
    pod, pv = wl.names[i], volume_name(namespace, wl.names[i])
    claim = claim_name(pod)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv, "labels": {ZONE_LABEL: zone, **run_label}},
        "spec": {
            "capacity": {"storage": CAPACITY},
            "accessModes": [ACCESS_MODE],
            "storageClassName": STORAGE_CLASS,
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/var/lib/drs-zonal/{pv}"},  # never mounted: the testbed's kubelets are twins
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}
                    ]
                }
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim,
            "namespace": namespace,
            "labels": dict(run_label),
            "annotations": {BIND_COMPLETED: "yes"},
        },
        "spec": {
            "accessModes": [ACCESS_MODE],
            "storageClassName": STORAGE_CLASS,
            "volumeName": pv,
            "resources": {"requests": {"storage": CAPACITY}},
        },
    }
    return volume, pvc


def bound_to(pv: dict[str, Any], claim_uid: str) -> dict[str, Any]:
    """``pv`` with the uid of its (created) claim in ``claimRef``, as the PV controller binds it: a volume whose
    claimRef lacks it would make the controller mark a bind-completed claim Lost."""
    ref = pv["spec"]["claimRef"] | {"uid": claim_uid}
    return pv | {"spec": pv["spec"] | {"claimRef": ref}}


def mount(body: dict[str, Any], claim: str) -> None:
    """Mount ``claim`` in the pod ``body`` (its first container, at /data)."""
    spec = body["spec"]
    spec["volumes"] = [{"name": VOLUME, "persistentVolumeClaim": {"claimName": claim}}]
    spec["containers"][0]["volumeMounts"] = [{"name": VOLUME, "mountPath": "/data"}]


def delete_run_volumes(core: Any, namespace: str, selector: str) -> None:
    """Delete the run's claims and its (cluster-scoped) volumes, which deleting its pods or namespace would not."""
    drained(core.delete_collection_namespaced_persistent_volume_claim(namespace, _preload_content=False))
    drained(core.delete_collection_persistent_volume(label_selector=selector, _preload_content=False))
