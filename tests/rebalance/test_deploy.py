"""The rebalancer's deployment: deploy/k8s/60-rebalancer.yaml and the chart's rebalancer say the same, start in
dry-run, and give its ServiceAccount only the verbs it needs, checked by the real kube-apiserver's RBAC."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from drs_prom.config import load_settings
from tests.helm.render import documents, helm_binary, render
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
SA = ("drs-system", "drs-rebalancer")


def _plain() -> dict[tuple[str, str], dict]:
    return {
        (d["kind"], d["metadata"]["name"]): d
        for d in yaml.safe_load_all((DEPLOY / "60-rebalancer.yaml").read_text())
        if d
    }


def test_the_manifest_runs_one_dry_run_rebalancer(tmp_path):
    docs = _plain()
    path = tmp_path / "config.yaml"
    path.write_text(docs[("ConfigMap", "drs-rebalancer-config")]["data"]["config.yaml"])
    s = load_settings(path)
    assert s.rebalance.mode == "dry-run" and not s.rebalance.taint_hot_nodes
    assert "kube-system" in s.rebalance.exclude_namespaces
    assert s.scheduler.model_path == ""  # the model the package ships, as the scheduler's own config
    dep = docs[("Deployment", "drs-rebalancer")]["spec"]
    assert dep["replicas"] == 1 and dep["strategy"] == {"type": "Recreate"}
    c = dep["template"]["spec"]["containers"][0]
    assert c["args"][0] == "rebalance" and c["securityContext"]["readOnlyRootFilesystem"]
    assert c["ports"][0]["containerPort"] == int(s.rebalance.metrics_listen.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def sa_kubeconfig(control_plane):
    control_plane.kubectl("apply", "-f", str(DEPLOY / "00-namespace.yaml"), check=True)
    control_plane.kubectl("apply", "-f", str(DEPLOY / "60-rebalancer.yaml"), check=True)
    kubeconfig = control_plane.make_sa_kubeconfig(*SA)
    wait_for(lambda: _can(control_plane, kubeconfig, "create", "pods:eviction", "some-ns"), 30, "the binding in effect")
    return kubeconfig


def _can(cp, kubeconfig, verb, resource, namespace=None):
    resource, _, sub = resource.partition(":")
    return cp.can_i(verb, resource, kubeconfig=kubeconfig, namespace=namespace, subresource=sub or None)


ALLOWED = [
    ("list", "pods", None),
    ("get", "pods", "some-ns"),
    ("list", "nodes", None),
    ("list", "poddisruptionbudgets.policy", None),
    ("create", "pods:eviction", "some-ns"),
    ("create", "events", "some-ns"),
    ("create", "tokenreviews.authentication.k8s.io", None),  # delegated auth of its /metrics
    ("patch", "pods", "some-ns"),  # a surge's pod deletion cost
    ("list", "deployments.apps", None),  # the surges under way
    ("get", "deployments.apps", "some-ns"),
    ("patch", "deployments.apps", "some-ns"),  # a surge's replica count and its annotation
    ("get", "replicasets.apps", "some-ns"),
    ("list", "horizontalpodautoscalers.autoscaling", "some-ns"),
]
REFUSED = [
    ("delete", "pods", "some-ns"),  # only through the Eviction API, so budgets hold
    ("create", "pods", "some-ns"),
    ("update", "pods", "some-ns"),
    ("patch", "pods:status", "some-ns"),
    ("create", "pods:binding", "some-ns"),
    ("patch", "nodes", None),  # only with optional/rebalancer-taint.yaml
    ("update", "nodes", None),
    ("get", "secrets", "drs-system"),
    ("delete", "poddisruptionbudgets.policy", "some-ns"),
    ("watch", "pods", None),
    ("create", "deployments.apps", "some-ns"),
    ("delete", "deployments.apps", "some-ns"),
    ("patch", "replicasets.apps", "some-ns"),
    ("patch", "horizontalpodautoscalers.autoscaling", "some-ns"),
]


def test_its_service_account_may_do_what_it_needs_and_nothing_more(control_plane, sa_kubeconfig):
    for verb, resource, ns in ALLOWED:
        assert _can(control_plane, sa_kubeconfig, verb, resource, ns), (verb, resource)
    for verb, resource, ns in REFUSED:
        assert not _can(control_plane, sa_kubeconfig, verb, resource, ns), (verb, resource)
    control_plane.kubectl("apply", "-f", str(DEPLOY / "optional" / "rebalancer-taint.yaml"), check=True)
    try:
        wait_for(lambda: _can(control_plane, sa_kubeconfig, "patch", "nodes"), 30, "the taint role in effect")
    finally:
        control_plane.kubectl("delete", "-f", str(DEPLOY / "optional" / "rebalancer-taint.yaml"), "--wait=false")


@pytest.fixture(scope="module")
def helm_bin() -> str:
    try:
        return helm_binary()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


def test_the_chart_says_what_the_manifest_says(helm_bin, tmp_path):
    chart = documents(render(helm_bin, tmp_path))
    plain = _plain()
    assert chart[("ClusterRole", "drs-rebalancer-drs")]["rules"] == plain[("ClusterRole", "drs-rebalancer")]["rules"]
    c = chart[("Deployment", "drs-rebalancer")]["spec"]
    p = plain[("Deployment", "drs-rebalancer")]["spec"]
    assert c["replicas"] == p["replicas"] == 1 and c["strategy"] == p["strategy"]
    cc, pc = c["template"]["spec"]["containers"][0], p["template"]["spec"]["containers"][0]
    assert (
        cc["args"][:3] == pc["args"] and cc["ports"] == pc["ports"] and cc["securityContext"] == pc["securityContext"]
    )
    assert c["template"]["spec"]["securityContext"] == p["template"]["spec"]["securityContext"]
    path = tmp_path / "config.yaml"
    path.write_text(chart[("ConfigMap", "drs-scheduler-config")]["data"]["config.yaml"])
    s = load_settings(path)
    assert s.rebalance.mode == "dry-run" and s.rebalance.journal_path.startswith("/var/lib/drs/")
    tainting = documents(
        render(
            helm_bin,
            tmp_path,
            {"settings": {"prometheus": {"url": "http://p:9090"}, "rebalance": {"taint_hot_nodes": True}}},
        )
    )
    rules = tainting[("ClusterRole", "drs-rebalancer-drs")]["rules"]
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]} in rules
    evicting = documents(
        render(
            helm_bin, tmp_path, {"settings": {"prometheus": {"url": "http://p:9090"}, "rebalance": {"surge": False}}}
        )
    )
    rules = evicting[("ClusterRole", "drs-rebalancer-drs")]["rules"]
    assert not [r for r in rules if "deployments" in r["resources"] or "patch" in r["verbs"]]  # no surges: no writes
    off = documents(render(helm_bin, tmp_path, {"rebalancer": {"enabled": False}}))
    assert ("Deployment", "drs-rebalancer") not in off and ("ClusterRole", "drs-rebalancer-drs") not in off
