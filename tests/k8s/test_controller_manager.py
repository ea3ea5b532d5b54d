"""The harness's kube-controller-manager: PDB status, ReplicaSets, garbage collection and PV binding work
as on a real cluster (each assertion waits, bounded, for the real controller's write)."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def _ready_pod(ns: str, name: str, node: str, labels: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }


@pytest.fixture
def namespace(control_plane):
    ns = f"kcm-{uuid.uuid4().hex[:6]}"
    control_plane.create_namespace(ns)
    return ns


def test_disruption_controller_writes_pdb_status(control_plane, controller_manager, fake_nodes, namespace):
    core = client.CoreV1Api(control_plane.admin_client)
    node = fake_nodes(f"kcm-n-{uuid.uuid4().hex[:6]}")
    for i in range(3):
        core.create_namespaced_pod(namespace, _ready_pod(namespace, f"p{i}", node, {"app": "web"}))
        status = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
        core.patch_namespaced_pod_status(f"p{i}", namespace, status)
    policy = client.PolicyV1Api(control_plane.admin_client)
    body = {
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    policy.create_namespaced_pod_disruption_budget(namespace, body)

    def allowed():
        st = policy.read_namespaced_pod_disruption_budget("web", namespace).status
        return st is not None and st.current_healthy == 3 and st.disruptions_allowed == 1

    wait_for(allowed, 30, "the disruption controller to count 3 healthy pods and allow 1 disruption")


def test_replicaset_makes_pods_and_garbage_collector_removes_them(control_plane, controller_manager, namespace):
    apps = client.AppsV1Api(control_plane.admin_client)
    core = client.CoreV1Api(control_plane.admin_client)
    labels = {"app": "rs"}
    body = {
        "metadata": {"name": "rs"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    apps.create_namespaced_replica_set(namespace, body)
    wait_for(lambda: len(core.list_namespaced_pod(namespace).items) == 2, 30, "the ReplicaSet's 2 pods")
    apps.delete_namespaced_replica_set("rs", namespace, propagation_policy="Background")
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, 60, "the garbage collector to delete the pods")


def test_persistentvolume_binder_binds_a_matching_claim(control_plane, controller_manager, namespace):
    core = client.CoreV1Api(control_plane.admin_client)
    pv = f"kcm-pv-{uuid.uuid4().hex[:6]}"
    core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "hostPath": {"path": "/tmp/unused"},
            },
        }
    )
    try:
        core.create_namespaced_persistent_volume_claim(
            namespace,
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        claim = wait_for(
            lambda: (
                (c := core.read_namespaced_persistent_volume_claim("data", namespace)).status.phase == "Bound" and c
            ),
            30,
            "the claim to bind",
        )
        assert claim.spec.volume_name == pv
    finally:
        core.delete_persistent_volume(pv)
