"""deploy/k8s against the real kube-apiserver: every manifest passes server-side dry-run,
and the scheduler's ServiceAccount can do exactly what scheduling needs and nothing more."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from drs_prom.config import load_settings
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
SA = ("drs-system", "drs-scheduler")


@pytest.fixture(scope="module")
def sa_kubeconfig(control_plane):
    for f in ("00-namespace.yaml", "10-rbac.yaml"):
        control_plane.kubectl("apply", "-f", str(DEPLOY / f), check=True)
    kubeconfig = control_plane.make_sa_kubeconfig(*SA)
    # the apiserver's RBAC authorizer reads bindings from an informer: let it catch up before any test asks
    wait_for(
        lambda: _can(control_plane, kubeconfig, "create", "pods:binding", "some-ns"),
        30,
        "the ClusterRoleBinding in effect",
    )
    return kubeconfig


@pytest.mark.parametrize("target", [".", "samples", "extender/extender.yaml"])
def test_manifests_pass_server_side_dry_run(control_plane, sa_kubeconfig, target):
    proc = control_plane.kubectl("apply", "--dry-run=server", "-f", str(DEPLOY / target))
    assert proc.returncode == 0, proc.stderr
    assert "(server dry run)" in proc.stdout


def test_configmap_holds_a_valid_settings_file(tmp_path):
    cm = yaml.safe_load((DEPLOY / "20-configmap.yaml").read_text())
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    s = load_settings(path)
    assert s.scheduler.leader_election and s.scheduler.lease_namespace == "drs-system"


def test_workloads_and_daemonset_shape():
    docs = {
        d["metadata"]["name"]: d
        for f in ("30-scheduler.yaml", "40-node-exporter.yaml")
        for d in yaml.safe_load_all((DEPLOY / f).read_text())
    }
    dep = docs["drs-scheduler"]["spec"]
    assert dep["replicas"] == 2
    c = dep["template"]["spec"]["containers"][0]
    assert c["securityContext"]["readOnlyRootFilesystem"] and dep["template"]["spec"]["securityContext"]["runAsNonRoot"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ds = docs["drs-node-exporter"]["spec"]["template"]
    assert ds["metadata"]["labels"]["app.kubernetes.io/name"] == "drs-node-exporter"
    assert ds["spec"]["hostNetwork"] is True
    port = ds["spec"]["containers"][0]["ports"][0]
    assert (port["name"], port["containerPort"]) == ("metrics", 9105)
    env = {e["name"]: e for e in ds["spec"]["containers"][0]["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    for f in (DEPLOY / "samples").glob("*.yaml"):
        for d in yaml.safe_load_all(f.read_text()):
            if d["kind"] == "Deployment":
                spec = d["spec"]["template"]
                assert spec["spec"]["schedulerName"] == "drs-scheduler"
                assert spec["metadata"]["annotations"]["drs.io/profile"] in ("video", "net", "disk")


def _can(cp, kubeconfig, verb, resource, namespace):
    """``resource:sub`` asks about a subresource (kubectl auth can-i --subresource)."""
    resource, _, sub = resource.partition(":")
    return cp.can_i(verb, resource, kubeconfig=kubeconfig, namespace=namespace, subresource=sub or None)


ALLOWED = [
    ("get", "pods", None),
    ("list", "pods", None),
    ("watch", "pods", None),
    ("get", "nodes", None),
    ("list", "nodes", None),
    ("watch", "nodes", None),
    ("list", "namespaces", None),  # namespaceSelector of pod (anti-)affinity terms
    ("watch", "namespaces", None),
    ("list", "persistentvolumeclaims", None),  # the volume filters
    ("watch", "persistentvolumes", None),
    ("watch", "storageclasses.storage.k8s.io", None),
    ("watch", "csinodes.storage.k8s.io", None),  # NodeVolumeLimits
    ("list", "volumeattachments.storage.k8s.io", None),
    ("create", "pods:binding", "some-ns"),
    ("update", "persistentvolumes", None),  # pre-binds a volume to a claim waiting for its first consumer
    ("patch", "persistentvolumeclaims", "some-ns"),  # the claim's selected node, for its provisioner
    ("list", "poddisruptionbudgets.policy", None),  # preemption respects the budgets
    ("watch", "poddisruptionbudgets.policy", None),
    ("delete", "pods", "some-ns"),  # preemption evicts the victims
    ("patch", "pods:status", "some-ns"),  # DisruptionTarget, nominatedNodeName
    ("create", "events", "some-ns"),
    ("patch", "events", "some-ns"),
    ("create", "events.events.k8s.io", "some-ns"),
    ("create", "leases.coordination.k8s.io", "drs-system"),
    ("create", "tokenreviews.authentication.k8s.io", None),  # delegated auth of /metrics
    ("create", "subjectaccessreviews.authorization.k8s.io", None),
]
REFUSED = [
    ("get", "secrets", "drs-system"),
    ("list", "secrets", None),
    ("get", "configmaps", "kube-system"),
    ("create", "pods", "some-ns"),
    ("update", "pods", "some-ns"),
    ("patch", "pods", "some-ns"),
    ("update", "pods:status", "some-ns"),
    ("delete", "poddisruptionbudgets.policy", "some-ns"),
    ("update", "nodes", None),
    ("patch", "nodes", None),
    ("delete", "nodes", None),
    ("update", "nodes:status", None),
    ("update", "namespaces", None),
    ("delete", "namespaces", None),
    ("update", "persistentvolumeclaims", "some-ns"),
    ("delete", "persistentvolumes", None),
    ("create", "persistentvolumes", None),
    ("patch", "persistentvolumes", None),
    ("delete", "persistentvolumeclaims", "some-ns"),
    ("create", "leases.coordination.k8s.io", "kube-system"),
    ("list", "leases.coordination.k8s.io", "drs-system"),
    ("delete", "leases.coordination.k8s.io", "drs-system"),
    ("create", "deployments.apps", "drs-system"),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None),
    ("create", "serviceaccounts:token", "drs-system"),
]


@pytest.mark.parametrize(("verb", "resource", "namespace"), ALLOWED)
def test_service_account_may(control_plane, sa_kubeconfig, verb, resource, namespace):
    assert _can(control_plane, sa_kubeconfig, verb, resource, namespace)


@pytest.mark.parametrize(("verb", "resource", "namespace"), REFUSED)
def test_service_account_may_not(control_plane, sa_kubeconfig, verb, resource, namespace):
    assert not _can(control_plane, sa_kubeconfig, verb, resource, namespace)


def test_lease_update_limited_to_its_own_lease(control_plane, sa_kubeconfig):
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    coord = client.CoordinationV1Api(control_plane.api_client(sa_kubeconfig))
    with pytest.raises(ApiException) as err:
        coord.read_namespaced_lease("someone-elses-lease", "drs-system")
    assert err.value.status == 403
