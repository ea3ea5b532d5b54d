"""Surges on real parts: a real kube-apiserver with the real Deployment, ReplicaSet and disruption controllers, a real
Prometheus storing what the fake nodes and their pods use (tests.rebalance.twin).

The harness's nodes have no kubelet and it runs no scheduler, so the test does their part for the pods the
ReplicaSet controller makes: it binds each to a node (as a scheduler does, through the Binding API) and reports it
running and ready (as a kubelet does, through the pod's status). Everything else is the controllers' own doing: the
Deployment's count goes to its ReplicaSet, and the ReplicaSet picks the pod it removes when the count goes back."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from drs_prom.rebalance import actions
from drs_prom.rebalance.surge import DELETION_COST, LANDED_BACK, LOWEST_COST, MOVED, SURGE_LABEL, TIMED_OUT
from tests.k8s.budgets import counted_budget
from tests.rebalance.conftest import LABEL, Harness, pod_json, rebalancer, running, wait_hot
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def live_pods(h: Harness, ns: str, app: str) -> list[Any]:
    core = client.CoreV1Api(h.api)
    got = core.list_namespaced_pod(ns, label_selector=f"app={app}").items
    return [p for p in got if not p.metadata.deletion_timestamp]


def place(h: Harness, ns: str, app: str, node: str, cores: float, ready: bool = True, seconds_ago: float = 3600) -> str:
    """Bind the ReplicaSet's next unbound pod of ``app`` to ``node`` and, with ``ready``, report it running and ready
    since ``seconds_ago``, with its usage served by the twin (the harness's scheduler and kubelet; module
    docstring)."""
    core = client.CoreV1Api(h.api)
    pod = wait_for(
        lambda: next((p for p in live_pods(h, ns, app) if not p.spec.node_name), None),
        30,
        f"the ReplicaSet to make a pod of {app}",
    )
    name = pod.metadata.name
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    core.create_namespaced_pod_binding(name, ns, body, _preload_content=False)
    if ready:
        running(core, ns, name, seconds_ago)
        h.twin.add_pod(ns, name, node, cores)
    return name


def deployment(h: Harness, ns: str, app: str, node: str, cores: list[float]) -> list[str]:
    """A Deployment of ``len(cores)`` replicas, each placed on ``node`` using the cores given; waits until the
    Deployment reports them all ready."""
    apps = client.AppsV1Api(h.api)
    labels = {"app": app}
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "500m"}}}
            ],
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {LABEL: "yes"},
        },
    }
    body = {"metadata": {"name": app}, "spec": {"replicas": len(cores), "selector": {"matchLabels": labels}}}
    body["spec"]["template"] = template
    apps.create_namespaced_deployment(ns, body)
    names = [place(h, ns, app, node, c) for c in cores]
    wait_ready(h, ns, app, len(cores))
    return names


def wait_ready(h: Harness, ns: str, app: str, n: int) -> None:
    apps = client.AppsV1Api(h.api)

    def ok() -> bool:
        d = apps.read_namespaced_deployment(app, ns)
        return (d.status.ready_replicas or 0) >= n and (d.status.observed_generation or 0) >= d.metadata.generation

    wait_for(ok, 30, f"Deployment {app} to report {n} ready replicas")


def hot_deployment(h: Harness, ns: str, app: str, node: str, **rebalance: Any) -> tuple[list[str], Any]:
    """A Deployment of two pods (3 and 3.5 cores) on ``node``, and the settings (mode evict, ``rebalance``) under
    which the window reads ``node`` hot and the last harness node cool."""
    olds = deployment(h, ns, app, node, [3.0, 3.5])
    s = h.settings(ns, mode="evict", **rebalance)
    wait_hot(h, s, {node}, {h.nodes[3]})
    return olds, s


def test_a_deployments_pod_is_replaced_first_and_removed_once_its_replacement_is_ready(harness, namespace, clean):
    h = harness
    a = h.nodes[1]
    apps = client.AppsV1Api(h.api)
    olds, s = hot_deployment(h, namespace, "web", a)
    rb = rebalancer(h, s)
    got = rb.run_once()
    assert [o for _, o, _ in got.outcomes] == [actions.SURGED]
    moved = got.outcomes[0][0].pod.key.split("/", 1)[1]
    assert moved == olds[1]  # the bigger pod relieves the node most
    d = apps.read_namespaced_deployment("web", namespace)
    assert d.spec.replicas == 3 and d.metadata.labels.get(SURGE_LABEL) == "true"
    assert pod_json(h, namespace, moved)["metadata"]["annotations"][DELETION_COST] == LOWEST_COST
    assert {p.metadata.name for p in live_pods(h, namespace, "web") if p.spec.node_name} == set(olds)  # both still run

    waiting = rb.run_once()  # the replacement is not ready yet: nothing more happens, and nothing else moves
    assert [done for _, done in waiting.surges] == ["waiting"] and not waiting.outcomes

    new = place(h, namespace, "web", h.nodes[3], 3.5)  # the cool node
    wait_ready(h, namespace, "web", 3)
    done = rb.run_once()
    assert [r for _, r in done.surges] == [MOVED]
    d = apps.read_namespaced_deployment("web", namespace)
    assert d.spec.replicas == 2 and SURGE_LABEL not in (d.metadata.labels or {})
    assert SURGE_LABEL not in (d.metadata.annotations or {})
    wait_for(
        lambda: {p.metadata.name for p in live_pods(h, namespace, "web")} == {olds[0], new},
        30,
        "the ReplicaSet to remove the marked pod, and only it",
    )
    assert not done.outcomes  # the move just made relieves the node: nothing else is moved for it
    samples = rb.metrics.registry.get_sample_value
    assert samples("drs_rebalance_evictions_total", {"outcome": "surged"}) == 1
    assert samples("drs_rebalance_evictions_total", {"outcome": "evicted"}) == 0
    assert samples("drs_rebalance_surges_total", {"result": "moved"}) == 1


def test_a_replacement_that_does_not_get_ready_in_time_is_taken_back_and_the_pod_stays(harness, namespace, clean):
    h = harness
    a = h.nodes[2]
    apps = client.AppsV1Api(h.api)
    olds, s = hot_deployment(h, namespace, "slow", a, surge_timeout_seconds=60)
    now = [time.time()]  # the pods' ages are read against it
    rb = rebalancer(h, s, clock=lambda: now[0])
    got = rb.run_once()
    assert [o for _, o, _ in got.outcomes] == [actions.SURGED]
    stuck = place(h, namespace, "slow", h.nodes[3], 3.5, ready=False)  # bound, never ready
    now[0] += 61
    done = rb.run_once()
    assert [r for _, r in done.surges] == [TIMED_OUT]
    d = apps.read_namespaced_deployment("slow", namespace)
    assert d.spec.replicas == 2 and SURGE_LABEL not in (d.metadata.labels or {})
    wait_for(
        lambda: {p.metadata.name for p in live_pods(h, namespace, "slow")} == set(olds),
        30,
        f"the ReplicaSet to remove the replica that did not get ready ({stuck})",
    )
    for p in olds:
        assert DELETION_COST not in (pod_json(h, namespace, p)["metadata"].get("annotations") or {})
    assert rb.metrics.registry.get_sample_value("drs_rebalance_surges_total", {"result": "timed_out"}) == 1


def test_a_deployment_scaled_by_an_autoscaler_has_its_pod_evicted_not_surged(harness, namespace, clean):
    h = harness
    a = h.nodes[0]
    olds, s = hot_deployment(h, namespace, "scaled", a)
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "scaled"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "scaled"},
            "minReplicas": 2,
            "maxReplicas": 4,
        },
    }
    client.AutoscalingV2Api(h.api).create_namespaced_horizontal_pod_autoscaler(namespace, hpa)
    got = rebalancer(h, s).run_once()
    assert [o for _, o, _ in got.outcomes] == [actions.EVICTED]
    assert client.AppsV1Api(h.api).read_namespaced_deployment("scaled", namespace).spec.replicas == 2
    gone = pod_json(h, namespace, olds[1])
    assert gone is None or gone["metadata"].get("deletionTimestamp")


def test_a_budget_that_allows_no_disruption_keeps_a_deployments_pod_from_a_surge_too(harness, namespace, clean):
    h = harness
    a = h.nodes[1]
    olds, s = hot_deployment(h, namespace, "kept", a)
    counted_budget(h.api, namespace, "kept", {"app": "kept"}, min_available=2, healthy=2)
    got = rebalancer(h, s).run_once()
    assert [o for _, o, _ in got.outcomes] == [actions.PDB]
    d = client.AppsV1Api(h.api).read_namespaced_deployment("kept", namespace)
    assert d.spec.replicas == 2 and SURGE_LABEL not in (d.metadata.labels or {})
    assert {p.metadata.name for p in live_pods(h, namespace, "kept")} == set(olds)
    assert DELETION_COST not in (pod_json(h, namespace, olds[1])["metadata"].get("annotations") or {})


def test_a_replacement_placed_back_on_the_pods_own_node_is_taken_back(harness, namespace, clean):
    h = harness
    a = h.nodes[2]
    apps = client.AppsV1Api(h.api)
    olds, s = hot_deployment(h, namespace, "back", a)
    rb = rebalancer(h, s)
    assert [o for _, o, _ in rb.run_once().outcomes] == [actions.SURGED]
    again = place(h, namespace, "back", a, 0.1, seconds_ago=0)  # its scheduler put it on the hot node itself
    wait_ready(h, namespace, "back", 3)
    done = rb.run_once()
    assert [r for _, r in done.surges] == [LANDED_BACK]
    assert apps.read_namespaced_deployment("back", namespace).spec.replicas == 2
    wait_for(
        lambda: {p.metadata.name for p in live_pods(h, namespace, "back")} == set(olds),
        30,
        f"the ReplicaSet to remove the replica ready for less time ({again})",
    )
    assert DELETION_COST not in (pod_json(h, namespace, olds[1])["metadata"].get("annotations") or {})
    assert rb.metrics.registry.get_sample_value("drs_rebalance_surges_total", {"result": "landed_back"}) == 1
