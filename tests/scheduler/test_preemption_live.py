"""Preemption by drs-prom's own scheduler on a real apiserver, with the real disruption controller writing
PodDisruptionBudget status: pods another scheduler placed are evicted for a higher-priority pod, the budget
decides which node, ``preemptionPolicy: Never`` waits, and a pod that preempted waits for its victims to
terminate with its room reserved, then binds there."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.k8s.budgets import counted_budget
from tests.scheduler.conftest import events_for, list_pods, pod_body
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

LOW, NEVER = "drs-pre-live-low", "drs-pre-live-never"


@pytest.fixture(scope="module")
def classes(control_plane) -> None:
    api = client.SchedulingV1Api(control_plane.admin_client)
    for name, value, policy in ((LOW, 10, "PreemptLowerPriority"), (NEVER, 1000, "Never")):
        body = {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy}
        try:
            api.create_priority_class(body)
        except ApiException as exc:
            if exc.status != 409:
                raise


def _placed(core, ns: str, name: str, node: str, cpu: str, app: str, started: int, grace: int = 0) -> None:
    """A running, Ready pod bound by someone else (no schedulerName of ours), started ``started`` s ago."""
    body = pod_body(name, cpu=cpu, scheduler="someone-else", nodeName=node, priorityClassName=LOW)
    body["metadata"]["labels"] = {"app": app}
    body["spec"]["terminationGracePeriodSeconds"] = grace
    core.create_namespaced_pod(ns, body, _preload_content=False)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - started))
    status = {"phase": "Running", "startTime": stamp, "conditions": [{"type": "Ready", "status": "True"}]}
    core.patch_namespaced_pod_status(name, ns, {"status": status})


def _pod(core, ns: str, name: str) -> dict[str, Any] | None:
    return next((p for p in list_pods(core, ns) if p["metadata"]["name"] == name), None)


def test_evicts_where_no_budget_breaks_and_binds(
    core, ns, fake_nodes, make_scheduler, controller_manager, classes, high_priority, control_plane
):
    a, b = fake_nodes(f"{ns}-a", cpu="2", labels={"pre": ns}), fake_nodes(f"{ns}-b", cpu="2", labels={"pre": ns})
    _placed(core, ns, "guarded-0", a, "1", "guarded", 200)
    _placed(core, ns, "guarded-1", a, "1", "guarded", 100)
    _placed(core, ns, "free-old", b, "1", "free", 300)
    _placed(core, ns, "free-new", b, "1", "free", 50)
    counted_budget(control_plane.admin_client, ns, "guarded", {"app": "guarded"}, min_available=2, healthy=2)
    sched = make_scheduler()
    tokens = []  # every preemption write waits for a token of the binds' bucket, as kube-scheduler's client does
    limit = sched.preemptor.limit
    sched.preemptor.limit = lambda: (tokens.append(1), limit())
    core.create_namespaced_pod(
        ns,
        pod_body("urgent", cpu="1", priorityClassName=high_priority, nodeSelector={"pre": ns}),
        _preload_content=False,
    )
    bound = wait_for(lambda: (p := _pod(core, ns, "urgent")) and p["spec"].get("nodeName"), 60, "urgent bound")
    names = {p["metadata"]["name"] for p in list_pods(core, ns)}
    # on a, either victim breaks the budget; on b none does: the newer of b's pods goes
    assert bound == b
    assert names == {"guarded-0", "guarded-1", "free-old", "urgent"}
    assert len(tokens) == 3  # the victim's condition, its deletion, the pod's nominatedNodeName
    message = next(e["message"] for e in events_for(core, ns, "urgent") if e["reason"] == "FailedScheduling")
    assert "Insufficient cpu" in message and f"preemption: nominated {b}, evicting 1" in message


def test_never_policy_waits_without_evicting(core, ns, fake_nodes, make_scheduler, classes):
    node = fake_nodes(f"{ns}-n", cpu="2", labels={"pre": ns})
    _placed(core, ns, "low", node, "2", "x", 10)
    make_scheduler()
    core.create_namespaced_pod(
        ns, pod_body("polite", cpu="1", priorityClassName=NEVER, nodeSelector={"pre": ns}), _preload_content=False
    )
    message = wait_for(
        lambda: next((e["message"] for e in events_for(core, ns, "polite") if e["reason"] == "FailedScheduling"), None),
        30,
        "FailedScheduling of polite",
    )
    assert "Insufficient cpu" in message and "preemption" not in message
    cond = wait_for(
        lambda: next(
            (c for c in _pod(core, ns, "polite")["status"].get("conditions") or () if c["type"] == "PodScheduled"), None
        ),
        30,
        "PodScheduled on polite",
    )
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", message)
    assert _pod(core, ns, "low") is not None and not _pod(core, ns, "low")["metadata"].get("deletionTimestamp")


def test_waits_for_terminating_victims_with_its_room_reserved(
    core, ns, fake_nodes, make_scheduler, classes, high_priority
):
    node = fake_nodes(f"{ns}-n", cpu="2", labels={"pre": ns})
    _placed(core, ns, "slow", node, "1500m", "x", 10, grace=30)  # no kubelet: it stays Terminating
    make_scheduler()
    core.create_namespaced_pod(
        ns,
        pod_body("urgent", cpu="1", priorityClassName=high_priority, nodeSelector={"pre": ns}),
        _preload_content=False,
    )
    victim = wait_for(
        lambda: (p := _pod(core, ns, "slow")) and p["metadata"].get("deletionTimestamp") and p, 30, "slow evicted"
    )
    condition = next(c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert condition.get("reason") == "PreemptionByScheduler" and condition["status"] == "True", victim["status"]
    wait_for(lambda: _pod(core, ns, "urgent")["status"].get("nominatedNodeName") == node, 30, "the nomination")
    preempted = wait_for(
        lambda: next((e["message"] for e in events_for(core, ns, "slow") if e["reason"] == "Preempted"), None),
        30,
        "the victim's Preempted event",
    )
    assert preempted.endswith(f"on node {node}")
    # a lower-priority pod arriving meanwhile must not take the room the eviction frees
    core.create_namespaced_pod(
        ns, pod_body("sneak", cpu="1500m", priorityClassName=LOW, nodeSelector={"pre": ns}), _preload_content=False
    )
    wait_for(lambda: any(e["reason"] == "FailedScheduling" for e in events_for(core, ns, "sneak")), 30, "sneak refused")
    assert not _pod(core, ns, "urgent")["spec"].get("nodeName")
    core.delete_namespaced_pod("slow", ns, grace_period_seconds=0)  # what the kubelet does once it stopped
    wait_for(lambda: _pod(core, ns, "urgent")["spec"].get("nodeName") == node, 30, "urgent bound on its node")
    assert not _pod(core, ns, "sneak")["spec"].get("nodeName")
