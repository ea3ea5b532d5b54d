"""Generated claims for the differential test: what kube-scheduler's VolumeBinding and VolumeZone read.

Each claim of the incoming pod is one of:

- ``bound``: a claim with ``volumeName`` and a PersistentVolume bound to it (``claimRef``, both
  phases Bound, as the PV controller leaves them) whose required node affinity names a zone or a
  node, and sometimes a zone label (VolumeZone);
- ``static``: an unbound claim of a WaitForFirstConsumer class without a provisioner, with 0-2
  Available volumes of that class (sizes below and above the claim's, node affinity on a zone or
  a node): kube-scheduler needs one that fits on the node;
- ``dynamic``: an unbound claim of a WaitForFirstConsumer class with a provisioner and
  allowedTopologies on zones a and b;
- ``immediate``: an unbound claim of an Immediate class, which no scheduler may place.

StorageClasses are per case (``@sc-…``), so that volumes and claims left by an earlier case never
match a later one's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
STORAGE_CLASS_NAMES = ("@sc-local", "@sc-dynamic", "@sc-immediate")
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def storage_classes() -> tuple[dict[str, Any], ...]:
    return (
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "@sc-local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "@sc-dynamic"},
            "provisioner": "drs.example/fake",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["a", "b"]}]}],
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "@sc-immediate"},
            "provisioner": "drs.example/fake",
            "volumeBindingMode": "Immediate",
        },
    )


@dataclass(frozen=True)
class Claims:
    """The case's volumes and the incoming pod's claims (placeholders as in cases.py)."""

    pvs: tuple[dict[str, Any], ...]
    pvcs: tuple[dict[str, Any], ...]

    def pod_volumes(self) -> list[dict[str, Any]]:
        return [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c["metadata"]["name"]}}
            for i, c in enumerate(self.pvcs)
        ]


@functools.cache
@st.composite
def node_affinity(draw: st.DrawFn, n_nodes: int) -> dict[str, Any]:
    if draw(st.booleans()):
        expr = {"key": ZONE, "operator": "In", "values": [draw(st.sampled_from(("a", "b", "c")))]}
    else:
        expr = {"key": HOSTNAME, "operator": "In", "values": [f"@n{draw(st.integers(0, n_nodes - 1))}"]}
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}


def _pv(name: str, storage_class: str, size: str, affinity: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "local": {"path": "/mnt/drs-diff"},
            "nodeAffinity": affinity,
        },
        "status": {"phase": "Available"},
    }


def _pvc(name: str, storage_class: str, size: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "@ns"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
        "status": {"phase": "Pending"},
    }


@functools.cache
@st.composite
def claims(draw: st.DrawFn, n_nodes: int) -> Claims:
    """0-2 claims of the incoming pod and the volumes they may use."""
    pvs: list[dict[str, Any]] = []
    pvcs: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(("bound", "bound", "static", "static", "dynamic", "immediate")))
        claim_name = f"claim{i}"
        if kind == "bound":
            pv_name = f"@pv{len(pvs)}"
            pv = _pv(pv_name, "@sc-local", "1Gi", draw(node_affinity(n_nodes)))
            if zone := draw(st.sampled_from(("", "a", "b"))):
                pv["metadata"]["labels"][ZONE] = zone
            pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "@ns", "name": claim_name}
            pv["status"] = {"phase": "Bound"}
            pvc = _pvc(claim_name, "@sc-local", "1Gi")
            pvc["metadata"]["annotations"] = {BIND_COMPLETED: "yes"}
            pvc["spec"]["volumeName"] = pv_name
            pvc["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
            pvs.append(pv)
        elif kind == "static":
            pvc = _pvc(claim_name, "@sc-local", "2Gi")
            for _ in range(draw(st.integers(0, 2))):
                size = draw(st.sampled_from(("1Gi", "5Gi")))
                pvs.append(_pv(f"@pv{len(pvs)}", "@sc-local", size, draw(node_affinity(n_nodes))))
        else:
            pvc = _pvc(claim_name, f"@sc-{kind}", "1Gi")
        pvcs.append(pvc)
    return Claims(pvs=tuple(pvs), pvcs=tuple(pvcs))
