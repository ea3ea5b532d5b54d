"""Generated CSI volumes for the differential test: what kube-scheduler's NodeVolumeLimits reads.

A case with the ``csi_limits`` feature has 1-3 CSI PersistentVolumes of one driver, each bound to a
claim ``csi<i>`` in ``@ns`` (as the PV controller leaves them), sometimes an unbound claim of a
WaitForFirstConsumer class whose provisioner is that driver (it counts as one volume wherever a
pod mounting it is placed), a CSINode with an attach limit of 0-2 for the driver on most nodes
(a node without one has no limit), and sometimes a VolumeAttachment of one volume to one node.
Bound pods in ``@ns`` mount some of the claims; the incoming pod mounts 0-2 of the bound ones.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

DRIVER = "csi.drs-diff.example.com"
CSI_CLASS = "@sc-csi"
PENDING_CLAIM = "csi-pending"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def storage_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CSI_CLASS},
        "provisioner": DRIVER,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


@dataclass(frozen=True)
class CsiVolumes:
    """The case's CSI volumes, claims, CSINodes and VolumeAttachments (placeholders as in cases.py)."""

    pvs: tuple[dict[str, Any], ...]
    pvcs: tuple[dict[str, Any], ...]
    csi_nodes: tuple[dict[str, Any], ...]
    attachments: tuple[dict[str, Any], ...]

    @property
    def bound_claims(self) -> tuple[str, ...]:
        return tuple(c["metadata"]["name"] for c in self.pvcs if c["spec"].get("volumeName"))

    @property
    def claims(self) -> tuple[str, ...]:
        return tuple(c["metadata"]["name"] for c in self.pvcs)


def mounts(names: list[str]) -> list[dict[str, Any]]:
    """Pod volumes mounting ``names``."""
    return [{"name": f"csi{i}", "persistentVolumeClaim": {"claimName": n}} for i, n in enumerate(names)]


def _pv(name: str, claim: str, handle: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": CSI_CLASS,
            "csi": {"driver": DRIVER, "volumeHandle": handle},
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "@ns", "name": claim},
        },
        "status": {"phase": "Bound"},
    }


def _pvc(name: str, volume: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "@ns"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": CSI_CLASS,
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Pending"},
    }
    if volume:
        body["metadata"]["annotations"] = {BIND_COMPLETED: "yes"}
        body["spec"]["volumeName"] = volume
        body["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    return body


@functools.cache
@st.composite
def csi_volumes(draw: st.DrawFn, n_nodes: int, first_pv: int) -> CsiVolumes:
    """Volumes named from ``@pv<first_pv>`` on (the case's other volumes come first)."""
    pvs, pvcs = [], []
    for i in range(draw(st.integers(1, 3))):
        pv_name = f"@pv{first_pv + i}"
        pvs.append(_pv(pv_name, f"csi{i}", f"handle-{i}"))
        pvcs.append(_pvc(f"csi{i}", pv_name))
    if draw(st.booleans()):
        pvcs.append(_pvc(PENDING_CLAIM, ""))
    csi_nodes = []
    for i in range(n_nodes):
        if draw(st.integers(0, 3)) == 0:
            continue  # no CSINode: no limit there
        driver = {"name": DRIVER, "nodeID": f"@n{i}", "allocatable": {"count": draw(st.integers(0, 2))}}
        csi_nodes.append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": f"@n{i}"},
                "spec": {"drivers": [driver]},
            }
        )
    attachments = []
    if draw(st.integers(0, 2)) == 0:
        attachments.append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttachment",
                "metadata": {"name": "@va0"},
                "spec": {
                    "attacher": DRIVER,
                    "nodeName": f"@n{draw(st.integers(0, n_nodes - 1))}",
                    "source": {"persistentVolumeName": draw(st.sampled_from([p["metadata"]["name"] for p in pvs]))},
                },
            }
        )
    return CsiVolumes(pvs=tuple(pvs), pvcs=tuple(pvcs), csi_nodes=tuple(csi_nodes), attachments=tuple(attachments))
