"""The scheduler against the real kube-apiserver (tests/k8s harness), as its least-privilege
ServiceAccount from deploy/k8s. Fake nodes have no kubelet: bound pods stay Pending, which
is all binding needs."""

from __future__ import annotations

import collections
import time
import urllib.request

import pytest

from tests.scheduler.conftest import events_for, journalled, list_pods, pod_body, scheduled_message
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def bound(core, ns):
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in list_pods(core, ns)}


def test_200_pods_over_5_nodes_all_bound_none_infeasible(core, ns, fake_nodes, make_scheduler, high_priority):
    fake_nodes("good-ssd", cpu="16", memory="64Gi", pods="150", labels={"disk": "ssd"})
    fake_nodes("good-hdd", cpu="16", memory="64Gi", pods="150", labels={"disk": "hdd"})
    fake_nodes(
        "tainted",
        cpu="64",
        memory="256Gi",
        labels={"disk": "ssd"},
        taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
    )
    fake_nodes("cordoned", cpu="64", memory="256Gi", labels={"disk": "ssd"}, unschedulable=True)
    fake_nodes("small", cpu="50m", memory="64Gi", labels={"disk": "ssd"})
    sched = make_scheduler()
    for i in range(200):
        extra = {"nodeSelector": {"disk": "ssd"}} if i % 2 == 0 else {}
        if i % 3 == 0:
            extra["priorityClassName"] = high_priority
        core.create_namespaced_pod(ns, pod_body(f"p{i:03d}", **extra), _preload_content=False)
    placed = wait_for(lambda: (b := bound(core, ns)) and all(b.values()) and len(b) == 200 and b, 120, "200 pods bound")
    assert set(placed.values()) <= {"good-ssd", "good-hdd"}
    for i in range(0, 200, 2):  # wrong selector: the ssd pods never went to the hdd node
        assert placed[f"p{i:03d}"] == "good-ssd"
    counts = collections.Counter(placed.values())
    assert counts["good-hdd"] > 0  # the unconstrained pods were spread, not all piled on one node
    # the counter moves when the bind response arrives, a moment after the apiserver shows the binding
    wait_for(lambda: sched.bound_count == 200, 10, "200 binds counted")
    # the ssd node's 150-pod limit held even though its CPU would have fitted more
    assert counts["good-ssd"] <= 150
    msg = scheduled_message(core, ns, "p000")
    assert "to good-ssd" in msg and "top scores:" in msg
    rows = journalled(sched, 200)
    assert len(rows) == 200 and {r.outcome for r in rows} == {"bound"}
    assert {r.fallback_reason for r in rows} == {"prometheus_unreachable"}  # no metrics source in this test
    # no usage history either: each pod's demand is its requests' estimate, and each bare pod its own owner
    assert {r.demand_source for r in rows} == {"requests"} and rows[0].owner == f"Pod/{rows[0].pod_name}"
    # schema 2: every row carries the NodeInfo the pod was scored on, aligned with candidates
    alloc = {"good-ssd": 16000, "good-hdd": 16000, "tainted": 64000, "cordoned": 64000, "small": 50}
    for r in rows:
        assert r.schema == 4 and r.pod_cpu_m == 100 and r.pod_mem_bytes == 64 * 2**20
        assert len(r.nodes) == len(r.candidates) == 5
        assert [e["allocatable_cpu_m"] for e in r.nodes] == [alloc[n] for n in r.candidates]
    # requests grow by one pod per bind: the k-th pod bound to a node saw k-1 pods' requests there
    for node, k in counts.items():
        seen = sorted(r.nodes[r.candidates.index(node)]["requested_cpu_m"] for r in rows if r.chosen == node)
        assert seen == [100 * i for i in range(k)], node
        pods_seen = sorted(r.nodes[r.candidates.index(node)]["pod_count"] for r in rows if r.chosen == node)
        assert pods_seen == list(range(k)), node
    # across the cluster the i-th decision saw i-1 pods' requests (rows are in bind order, which
    # parallel bind workers may shuffle slightly, so compare as a set)
    assert sorted(sum(e["requested_cpu_m"] for e in r.nodes) for r in rows) == [100 * i for i in range(200)]


def pod_scheduled(core, ns, name):
    """The pod's resourceVersion and its PodScheduled condition (None without one)."""
    pod = next(p for p in list_pods(core, ns) if p["metadata"]["name"] == name)
    conds = [c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"]
    return pod["metadata"]["resourceVersion"], (conds[0] if conds else None)


def test_fits_nowhere_gets_failed_scheduling_then_binds_when_room_appears(core, ns, fake_nodes, make_scheduler):
    fake_nodes("busy", cpu="2", memory="8Gi")
    sched = make_scheduler()
    core.create_namespaced_pod(ns, pod_body("hog", cpu="1500m"), _preload_content=False)
    wait_for(lambda: bound(core, ns).get("hog"), 30, "hog bound")
    core.create_namespaced_pod(ns, pod_body("big", cpu="1"), _preload_content=False)
    ev = wait_for(
        lambda: [e for e in events_for(core, ns, "big") if e["reason"] == "FailedScheduling"],
        30,
        "FailedScheduling for big",
    )
    assert ev[0]["type"] == "Warning"
    assert ev[0]["message"].startswith("0/1 nodes are available: 1 Insufficient cpu")
    # marked as kube-scheduler marks it, which is what cluster-autoscaler and Karpenter add nodes for
    version, cond = wait_for(lambda: (c := pod_scheduled(core, ns, "big"))[1] and c, 30, "PodScheduled on big")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", ev[0]["message"])
    assert cond["lastTransitionTime"]
    # it keeps being retried (with backoff), not dropped, and a retry that fails alike writes nothing
    tried = sched.metrics.registry.get_sample_value("drs_unschedulable_total")
    wait_for(lambda: sched.metrics.registry.get_sample_value("drs_unschedulable_total") > tried, 30, "a retry")
    assert bound(core, ns).get("big") is None
    assert pod_scheduled(core, ns, "big") == (version, cond)
    core.delete_namespaced_pod("hog", ns, grace_period_seconds=0)  # the node frees up
    assert wait_for(lambda: bound(core, ns).get("big"), 30, "big bound after room appeared") == "busy"
    assert pod_scheduled(core, ns, "big")[1]["status"] == "True"  # the Binding set it


def test_deleted_while_queued_does_not_crash_the_loop(core, ns, fake_nodes, make_scheduler):
    fake_nodes("tiny", cpu="1", memory="8Gi")
    sched = make_scheduler()
    core.create_namespaced_pod(ns, pod_body("never", cpu="4"), _preload_content=False)  # fits nowhere: stays queued
    wait_for(lambda: [e for e in events_for(core, ns, "never") if e["reason"] == "FailedScheduling"], 30, "queued")
    core.delete_namespaced_pod("never", ns, grace_period_seconds=0)
    wait_for(lambda: "never" not in bound(core, ns), 10, "pod deleted")
    # a malformed-but-accepted pod (affinity operator the apiserver accepts, values odd) must not stop the loop either
    core.create_namespaced_pod(ns, pod_body("after", cpu="100m"), _preload_content=False)
    assert wait_for(lambda: bound(core, ns).get("after"), 30, "pod after the deletion bound") == "tiny"
    # the bind worker counts the bind and lets the pod go once the bind's reply reaches it (from the write process),
    # which can be just after the apiserver shows it bound; the queue alone can empty earlier, when the watch sees the
    # pod bound. Wait for the worker's own effects, as journalled() does for the journal row
    wait_for(
        lambda: sched.bound_count == 1 and sched.queue.pending()["in_flight"] == 0 and len(sched.queue) == 0,
        10,
        "the bind reply in: counted, nothing in flight",
    )
    assert sched.healthy() and len(sched.queue) == 0
    assert sched.metrics.registry.get_sample_value("drs_schedule_errors_total") == 0
    base = f"http://127.0.0.1:{sched.http.port}"
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        text = r.read().decode()
    assert 'drs_binds_total{outcome="bound"} 1.0' in text and "drs_scheduling_latency_seconds_bucket" in text
    assert 'drs_fallback_decisions_total{reason="prometheus_unreachable"} 1.0' in text
    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(base + path, timeout=5) as r:
            assert r.status == 200


def test_a_bound_pod_that_ends_is_journalled_with_its_end(core, ns, fake_nodes, make_scheduler):
    """The twin of retraining times pods by these ends: a deleted bound pod of ours gets one, other pods none."""
    fake_nodes("n1", cpu="4", memory="8Gi")
    sched = make_scheduler()
    core.create_namespaced_pod(ns, pod_body("ours"), _preload_content=False)
    core.create_namespaced_pod(
        ns, pod_body("theirs", scheduler="other-scheduler", nodeName="n1"), _preload_content=False
    )
    wait_for(lambda: bound(core, ns).get("ours"), 30, "our pod bound")
    uid = journalled(sched, 1)[0].pod_uid
    t0 = time.time()
    for name in ("ours", "theirs"):
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    wait_for(lambda: not bound(core, ns), 30, "both pods deleted")
    ends = wait_for(lambda: sched.journal.pod_ends(), 10, "the end journalled")
    assert list(ends) == [uid] and t0 - 1 <= ends[uid] <= time.time()


def test_two_replicas_never_double_bind(core, ns, fake_nodes, make_scheduler):
    for i in range(3):
        fake_nodes(f"le-{i}", cpu="32", memory="64Gi")
    a = make_scheduler(identity="replica-a")
    b = make_scheduler(identity="replica-b")
    wait_for(lambda: a.is_leader() or b.is_leader(), 20, "a leader")
    assert not (a.is_leader() and b.is_leader())
    for i in range(40):
        core.create_namespaced_pod(ns, pod_body(f"x{i}"), _preload_content=False)
    wait_for(lambda: sum(1 for v in bound(core, ns).values() if v) >= 20, 60, "half bound")
    leader, standby = (a, b) if a.is_leader() else (b, a)
    leader.stop()  # releases the Lease; the standby takes over and binds the rest
    for i in range(40, 60):
        core.create_namespaced_pod(ns, pod_body(f"x{i}"), _preload_content=False)
    wait_for(lambda: (v := bound(core, ns)) and len(v) == 60 and all(v.values()), 60, "all 60 bound")
    assert standby.is_leader()
    # each pod bound exactly once (the counters move when the bind response arrives)
    wait_for(lambda: leader.bound_count + standby.bound_count == 60, 10, "60 binds counted")
    assert leader.bound_count + standby.bound_count == 60
    conflicts = sum(
        s.metrics.registry.get_sample_value("drs_binds_total", {"outcome": "conflict"}) or 0 for s in (a, b)
    )
    assert conflicts == 0
    wait_for(
        lambda: sum(1 for s in (a, b) for r in s.journal.since(0) if r.outcome == "bound") >= 60, 30, "60 journalled"
    )
    both = [r.pod_uid for s in (a, b) for r in s.journal.since(0) if r.outcome == "bound"]
    assert len(both) == len(set(both)) == 60


def test_pods_pending_before_start_are_all_bound(core, ns, fake_nodes, make_scheduler):
    fake_nodes("early", cpu="32", memory="64Gi")
    for i in range(50):
        core.create_namespaced_pod(ns, pod_body(f"e{i}"), _preload_content=False)
    sched = make_scheduler()
    wait_for(lambda: (b := bound(core, ns)) and len(b) == 50 and all(b.values()), 60, "50 pre-existing pods bound")
    wait_for(lambda: sched.bound_count == 50, 10, "50 binds counted")  # counted when the response arrives


def test_a_gated_pod_waits_for_its_gates_then_binds(core, ns, fake_nodes, make_scheduler):
    """A pod with schedulingGates is not ready to be scheduled (kube-scheduler's SchedulingGates): no attempt, no
    event, and the apiserver's own PodScheduled=False (SchedulingGated) left as it is, until its gates are gone."""
    fake_nodes("open", cpu="4", memory="8Gi")
    sched = make_scheduler()
    core.create_namespaced_pod(
        ns, pod_body("gated", schedulingGates=[{"name": "example.com/quota"}]), _preload_content=False
    )
    core.create_namespaced_pod(ns, pod_body("free"), _preload_content=False)  # queued after it: decided after it
    wait_for(lambda: bound(core, ns).get("free"), 30, "the pod after it bound")
    wait_for(lambda: sched.queue.pending()["in_flight"] == 0, 10, "nothing in flight")
    assert bound(core, ns)["gated"] is None and len(sched.queue) == 0
    assert events_for(core, ns, "gated") == []
    assert sched.metrics.registry.get_sample_value("drs_unschedulable_total") == 0
    assert [r.pod_name for r in journalled(sched, 1)] == ["free"]  # the gated pod was never decided, no bind tried
    assert pod_scheduled(core, ns, "gated")[1]["reason"] == "SchedulingGated"
    core.patch_namespaced_pod("gated", ns, {"spec": {"schedulingGates": None}})
    assert wait_for(lambda: bound(core, ns).get("gated"), 30, "bound once its gates are gone") == "open"
