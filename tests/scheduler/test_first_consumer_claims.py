"""Claims waiting for their first consumer, bound by drs-prom's own scheduler on a real apiserver with the
real kube-controller-manager's PersistentVolume controller finishing each binding.

A static local volume with node affinity to one fake node: the scheduler pre-binds it to the claim
(``claimRef``), the PV controller binds the claim, then the pod is bound to that node. A class with a
provisioner: the claim gets ``volume.kubernetes.io/selected-node`` for a node its allowedTopologies
admit and the pod waits unbound. No external provisioner runs in the harness, so the test creates the
volume one would (pre-bound to the claim) - the one part a real component cannot play here; the PV
controller then binds the claim and the pod follows. A claim no volume or provisioner can serve leaves
the pod Pending with kube-scheduler's wording.
"""

from __future__ import annotations

import pytest

from tests.scheduler.conftest import pod_body
from tests.scheduler.test_constraints_probe import _failed
from tests.waiting import wait_for

SELECTED_NODE = "volume.kubernetes.io/selected-node"


def _claim(name: str, sc: str, size: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "storageClassName": sc,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


def _pv(name: str, sc: str, size: str, disk: str, claim_ref: dict | None = None) -> dict:
    term = {"matchExpressions": [{"key": "disk", "operator": "In", "values": [disk]}]}
    spec = {
        "storageClassName": sc,
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "local": {"path": "/mnt/drs-test"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
    }
    if claim_ref:
        spec["claimRef"] = claim_ref
    return {"metadata": {"name": name}, "spec": spec}


def _mounting(name: str, claim: str, ns: str) -> dict:
    return pod_body(
        name, nodeSelector={"probe": ns}, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    )


def _node_of(core, ns: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, ns).spec.node_name


@pytest.mark.integration
def test_a_static_local_volume_is_bound_to_the_claim_and_the_pod_to_its_node(
    control_plane, controller_manager, core, ns, fake_nodes, make_scheduler
):
    from kubernetes import client

    fake_nodes(f"{ns}-s1", labels={"probe": ns, "disk": f"{ns}-s1"})
    target = fake_nodes(f"{ns}-s2", labels={"probe": ns, "disk": f"{ns}-s2"})
    storage = client.StorageV1Api(control_plane.admin_client)
    sc = f"local-{ns}"
    storage.create_storage_class(
        {
            "metadata": {"name": sc},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    pv = f"{ns}-local"
    core.create_persistent_volume(_pv(pv, sc, "5Gi", target))
    try:
        core.create_namespaced_persistent_volume_claim(ns, _claim("data", sc, "2Gi"))
        core.create_namespaced_persistent_volume_claim(ns, _claim("huge", sc, "10Gi"))
        make_scheduler()
        core.create_namespaced_pod(ns, _mounting("v", "data", ns), _preload_content=False)
        core.create_namespaced_pod(ns, _mounting("w", "huge", ns), _preload_content=False)
        assert wait_for(lambda: _node_of(core, ns, "v"), 60, "pod v bound") == target
        claim = core.read_namespaced_persistent_volume_claim("data", ns)
        assert claim.spec.volume_name == pv and claim.status.phase == "Bound"
        volume = core.read_persistent_volume(pv)
        assert (volume.spec.claim_ref.namespace, volume.spec.claim_ref.name) == (ns, "data")
        assert volume.spec.claim_ref.uid == claim.metadata.uid
        msg = wait_for(
            lambda: _failed(core, ns, "w", "didn't find available persistent volumes to bind"), 30, "w pending"
        )
        assert "node(s) didn't find available persistent volumes to bind" in msg
        assert _node_of(core, ns, "w") is None
    finally:
        for name in ("v", "w"):
            core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        for name in ("data", "huge"):
            core.delete_namespaced_persistent_volume_claim(name, ns)
        core.delete_persistent_volume(pv)
        storage.delete_storage_class(sc)


@pytest.mark.integration
def test_a_provisioned_claim_gets_the_selected_node_and_the_pod_waits_for_its_volume(
    control_plane, controller_manager, core, ns, fake_nodes, make_scheduler
):
    from kubernetes import client

    fake_nodes(f"{ns}-d1", labels={"probe": ns, "disk": "a"})
    target = fake_nodes(f"{ns}-d2", labels={"probe": ns, "disk": "b"})
    storage = client.StorageV1Api(control_plane.admin_client)
    sc = f"dynamic-{ns}"
    storage.create_storage_class(
        {
            "metadata": {"name": sc},
            "provisioner": f"{ns}.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "disk", "values": ["b"]}]}],
        }
    )
    pv = f"{ns}-provisioned"
    try:
        core.create_namespaced_persistent_volume_claim(ns, _claim("data", sc, "1Gi"))
        make_scheduler()
        core.create_namespaced_pod(ns, _mounting("v", "data", ns), _preload_content=False)

        def selected() -> str | None:
            annotations = core.read_namespaced_persistent_volume_claim("data", ns).metadata.annotations or {}
            return annotations.get(SELECTED_NODE)

        assert wait_for(selected, 30, "selected-node annotation") == target
        assert _node_of(core, ns, "v") is None  # waits for its volume
        # stands in for the external provisioner, which the harness does not run: the volume it would create
        uid = core.read_namespaced_persistent_volume_claim("data", ns).metadata.uid
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns, "name": "data", "uid": uid}
        core.create_persistent_volume(_pv(pv, sc, "1Gi", "b", claim_ref=ref))
        assert wait_for(lambda: _node_of(core, ns, "v"), 60, "pod v bound") == target
        assert core.read_namespaced_persistent_volume_claim("data", ns).spec.volume_name == pv
    finally:
        core.delete_namespaced_pod("v", ns, grace_period_seconds=0)
        core.delete_namespaced_persistent_volume_claim("data", ns)
        if core.list_persistent_volume(field_selector=f"metadata.name={pv}").items:
            core.delete_persistent_volume(pv)
        storage.delete_storage_class(sc)


@pytest.mark.integration
def test_a_claim_that_does_not_bind_in_time_fails_the_attempt_and_the_pod_is_retried(
    control_plane, core, ns, fake_nodes, make_scheduler
):
    """No provisioner answers: after the bind timeout the pod gets kube-scheduler's PreBind failure and
    stays unbound; the claim keeps its selected node, so the next attempt goes to the same node."""
    from kubernetes import client

    target = fake_nodes(f"{ns}-t1", labels={"probe": ns})
    storage = client.StorageV1Api(control_plane.admin_client)
    sc = f"slow-{ns}"
    storage.create_storage_class(
        {"metadata": {"name": sc}, "provisioner": f"{ns}.example.com", "volumeBindingMode": "WaitForFirstConsumer"}
    )
    try:
        core.create_namespaced_persistent_volume_claim(ns, _claim("data", sc, "1Gi"))
        make_scheduler(overrides={"scheduler.volume_bind_timeout_seconds": 1})
        core.create_namespaced_pod(ns, _mounting("v", "data", ns), _preload_content=False)
        wanted = 'running PreBind plugin "VolumeBinding": binding volumes: timed out waiting for the condition'
        wait_for(lambda: _failed(core, ns, "v", wanted), 30, "PreBind timeout event")
        assert _node_of(core, ns, "v") is None
        cond = wait_for(
            lambda: next(
                (c for c in core.read_namespaced_pod("v", ns).status.conditions or () if c.type == "PodScheduled"), None
            ),
            30,
            "PodScheduled on v",
        )
        assert (cond.status, cond.reason, cond.message) == ("False", "SchedulerError", wanted)  # as kube-scheduler
        annotations = core.read_namespaced_persistent_volume_claim("data", ns).metadata.annotations or {}
        assert annotations.get(SELECTED_NODE) == target
    finally:
        core.delete_namespaced_pod("v", ns, grace_period_seconds=0)
        core.delete_namespaced_persistent_volume_claim("data", ns)
        storage.delete_storage_class(sc)
