"""Integration tests for the real control-plane harness (etcd + kube-apiserver + kube-scheduler)."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from drs_prom.testbed.controlplane import can_i, kubectl
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def _uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_apiserver_ready_and_fake_nodes(control_plane, k8s_admin_client, fake_nodes):
    v1 = client.CoreV1Api(k8s_admin_client)
    names = [_uniq("fake-node") for _ in range(2)]
    fake_nodes(names[0], cpu="4", memory="8Gi", labels={"zone": "a"})
    fake_nodes(
        names[1],
        cpu="2",
        memory="4Gi",
        pods="10",
        taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
        unschedulable=True,
    )
    listed = {n.metadata.name: n for n in v1.list_node().items}
    assert set(names) <= set(listed)
    n0, n1 = listed[names[0]], listed[names[1]]
    assert n0.status.allocatable["cpu"] == "4" and n0.status.allocatable["memory"] == "8Gi"
    assert n0.status.capacity["pods"] == "110"
    assert n0.metadata.labels["zone"] == "a"
    assert n0.metadata.labels["kubernetes.io/hostname"] == names[0]
    ready = {c.type: c.status for c in n0.status.conditions}
    assert ready["Ready"] == "True"
    assert n1.spec.unschedulable is True
    assert n1.spec.taints[0].key == "dedicated"
    assert n1.status.allocatable["pods"] == "10"
    # kubectl (built binary, same version) sees them too
    out = kubectl("get", "nodes", "-o", "name", kubeconfig=control_plane.admin_kubeconfig, check=True)
    assert f"node/{names[0]}" in out.stdout.split()
    ver = kubectl("version", "-o", "json", kubeconfig=control_plane.admin_kubeconfig, check=True)
    assert '"serverVersion"' in ver.stdout


def test_kube_scheduler_binds_pod_to_fake_node(control_plane, k8s_admin_client, fake_nodes):
    v1 = client.CoreV1Api(k8s_admin_client)
    ns = _uniq("sched")
    control_plane.create_namespace(ns)
    node = _uniq("sched-node")
    # Only this node matches the pod's nodeSelector, so the binding is deterministic
    # even when other tests' fake nodes exist.
    fake_nodes(node, labels={"drs-test/pool": ns})
    sched = control_plane.start_kube_scheduler(
        """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: harness-scheduler
"""
    )
    try:
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name="plain"),
            spec=client.V1PodSpec(
                scheduler_name="harness-scheduler",
                node_selector={"drs-test/pool": ns},
                containers=[
                    client.V1Container(
                        name="c",
                        image="registry.invalid/pause:1",
                        resources=client.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
                    )
                ],
            ),
        )
        v1.create_namespaced_pod(ns, pod)

        def bound():
            p = v1.read_namespaced_pod("plain", ns)
            return p.spec.node_name

        try:
            node_name = wait_for(bound, timeout=60, what="pod to be bound")
        except AssertionError:
            raise AssertionError(f"pod not bound; scheduler log tail:\n{sched.log_tail(60)}") from None
        assert node_name == node
        p = v1.read_namespaced_pod("plain", ns)
        assert p.status.phase == "Pending"  # no kubelet
        assert sched.alive()
    finally:
        sched.stop()


def test_sa_kubeconfig_rbac(control_plane, k8s_admin_client):
    ns = _uniq("rbac")
    sa_kc = control_plane.make_sa_kubeconfig(ns, "reader")
    # Admin may do anything; the fresh SA may do nothing.
    assert can_i("list", "pods", control_plane.admin_kubeconfig, namespace=ns)
    assert not can_i("list", "pods", sa_kc, namespace=ns)
    assert not can_i("create", "pods", sa_kc, namespace=ns, subresource="binding")
    denied = kubectl("get", "pods", "-n", ns, kubeconfig=sa_kc)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()

    rbac = client.RbacAuthorizationV1Api(k8s_admin_client)
    rbac.create_namespaced_role(
        ns,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        ns,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="reader", namespace=ns)],
        ),
    )
    wait_for(lambda: can_i("list", "pods", sa_kc, namespace=ns), timeout=20, what="RBAC to allow list pods")
    assert not can_i("list", "pods", sa_kc, namespace="default")
    assert not can_i("delete", "pods", sa_kc, namespace=ns)
    # The python client works with the SA kubeconfig too.
    sa_client = control_plane.api_client(sa_kc)
    try:
        assert client.CoreV1Api(sa_client).list_namespaced_pod(ns).items == []
    finally:
        sa_client.close()
