"""``drs-prom rebalance`` on real parts: a real kube-apiserver with the real disruption and ReplicaSet controllers,
a real Prometheus storing what the fake nodes and their pods use (tests.rebalance.twin), the Eviction API.

No fakes: every verdict comes from the apiserver (a PodDisruptionBudget's 429, a ReplicaSet recreating its pod) or
from series Prometheus stored and the rebalancer queried. Waits are bounded polls of those real parts."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from kubernetes import client

from drs_prom.moves.hot import hot_nodes
from drs_prom.rebalance import actions
from drs_prom.rebalance.loop import MOVE_EVENT
from drs_prom.rebalance.reads import pod_usage
from drs_prom.stores.journal import Journal
from drs_prom.testbed.build import ControlPlaneError
from drs_prom.testbed.descheduler import (
    build_descheduler,
    low_node_utilization_policy,
    start_descheduler,
    token_secret,
    utilisation_query,
)
from tests.k8s.budgets import counted_budget
from tests.rebalance.conftest import LABEL, WINDOW, Harness, pod_body, pod_json, rebalancer, running, shares, wait_hot
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def replica_set(
    h: Harness, ns: str, name: str, placement: list[tuple[str, float]], budget: int | None = None
) -> list[str]:
    """A ReplicaSet whose pods run on the given nodes with the given cores (the twin serves their usage): the pods
    are made first, then the ReplicaSet adopts them (the controller sets itself as their owner)."""
    apps = client.AppsV1Api(h.api)
    core = client.CoreV1Api(h.api)
    labels = {"app": name}
    names = []
    for i, (node, cores) in enumerate(placement):
        pod = f"{name}-{i}"
        core.create_namespaced_pod(ns, pod_body(pod, node, labels))
        running(core, ns, pod)
        h.twin.add_pod(ns, pod, node, cores)
        names.append(pod)
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {LABEL: "yes"},
        },
    }
    body = {"metadata": {"name": name}, "spec": {"replicas": len(names), "selector": {"matchLabels": labels}}}
    body["spec"]["template"] = template
    apps.create_namespaced_replica_set(ns, body)

    def adopted() -> bool:
        pods = [core.read_namespaced_pod(p, ns) for p in names]
        return all(
            any(r.kind == "ReplicaSet" and r.controller for r in p.metadata.owner_references or []) for p in pods
        )

    wait_for(adopted, 30, f"the ReplicaSet {name} to adopt its pods")
    if budget is not None:
        counted_budget(h.api, ns, name, labels, min_available=budget, healthy=len(placement))
    return names


def events(h: Harness, ns: str, reason: str) -> list[Any]:
    core = client.CoreV1Api(h.api)
    return [e for e in core.list_namespaced_event(ns).items if e.reason == reason]


def test_hysteresis_on_stored_series(harness, namespace, clean):
    h = harness
    a, b = h.nodes[0], h.nodes[1]
    s = h.settings(namespace, hot_above=0.8, cool_below=0.5)  # a wide band: the loaded host jitters the rates
    r = s.rebalance

    def hot_now(was: set[str]) -> frozenset[str]:
        got = shares(h, s)
        return hot_nodes(h.nodes, np.array([[got[n]] + [0] * 5 for n in h.nodes]), was, r.hot_above, r.cool_below)

    h.twin.set_extra(a, 0.95 * 8)
    h.twin.set_extra(b, 0.65 * 8)  # between the thresholds, never hot before: not hot
    wait_hot(h, s, {a})
    hot = hot_now(set())
    assert a in hot and b not in hot
    h.twin.set_extra(a, 0.65 * 8)  # a cools into the band: still hot, it was hot
    wait_for(lambda: abs(shares(h, s)[a] - 0.65) < 0.08, 3 * WINDOW, "a's window to settle at 0.65")
    assert hot_now({a}) == {a} and hot_now(set()) == set()
    h.twin.set_extra(a, 0.3 * 8)
    wait_for(lambda: shares(h, s)[a] < r.cool_below - 0.1, 3 * WINDOW, "a to cool below the lower threshold")
    assert hot_now({a}) == set()


def test_dry_run_journals_what_it_would_move_and_evicts_nothing(harness, namespace, clean, tmp_path):
    h = harness
    a = h.nodes[0]
    pods = replica_set(h, namespace, "web", [(a, 2.0), (a, 2.0), (a, 2.5)])
    s = h.settings(namespace, mode="dry-run")
    wait_hot(h, s, {a}, {h.nodes[3]})
    journal = Journal(tmp_path / "journal.sqlite")
    try:
        rb = rebalancer(h, s, journal)
        got = rb.run_once()
        assert a in got.hot and [o for _, o, _ in got.outcomes] == [actions.DRY_RUN]
        move = got.outcomes[0][0]
        assert move.source == a and move.pod.key.startswith(f"{namespace}/web-") and move.target != a
        rows = journal.events(kind=MOVE_EVENT)
        assert len(rows) == 1 and rows[0].detail["outcome"] == "dry_run" and rows[0].detail["source"] == a
        assert rows[0].detail["source_before"] > 0.8 and rows[0].detail["mode"] == "dry-run"
        assert rb.metrics.registry.get_sample_value("drs_rebalance_evictions_total", {"outcome": "dry_run"}) == 1
        assert rb.metrics.registry.get_sample_value("drs_rebalance_evicting") == 0
    finally:
        journal.close()
    for p in pods:  # nothing was evicted: every pod is there, none terminating, no event
        got_pod = pod_json(h, namespace, p)
        assert got_pod is not None and not got_pod["metadata"].get("deletionTimestamp")
    assert not events(h, namespace, "Rebalanced")


def test_an_eviction_moves_the_pod_its_owner_recreates_it_and_an_event_says_why(harness, namespace, clean):
    h = harness
    a = h.nodes[1]
    pods = replica_set(h, namespace, "api", [(a, 3.0), (a, 3.5)])
    s = h.settings(namespace, mode="evict")
    wait_hot(h, s, {a}, {h.nodes[3]})
    rb = rebalancer(h, s)
    got = rb.run_once()
    assert [o for _, o, _ in got.outcomes] == [actions.EVICTED]
    moved = got.outcomes[0][0].pod.key.split("/", 1)[1]
    assert moved == "api-1"  # the bigger pod relieves the node most
    gone = pod_json(h, namespace, moved)
    assert gone is None or gone["metadata"].get("deletionTimestamp")
    core = client.CoreV1Api(h.api)
    wait_for(
        lambda: [
            p
            for p in core.list_namespaced_pod(namespace).items
            if p.metadata.name not in pods and not p.metadata.deletion_timestamp
        ],
        30,
        "the ReplicaSet to create a replacement",
    )
    ev = wait_for(lambda: events(h, namespace, "Rebalanced"), 10, "the Rebalanced event")
    assert ev[0].involved_object.name == moved and "% of its capacity" in ev[0].message and a in ev[0].message
    assert rb.metrics.registry.get_sample_value("drs_rebalance_evictions_total", {"outcome": "evicted"}) == 1


def test_a_budget_that_allows_no_disruption_blocks_the_eviction_and_it_is_not_retried(harness, namespace, clean):
    h = harness
    a = h.nodes[2]
    pods = replica_set(h, namespace, "guarded", [(a, 3.0), (a, 3.5)], budget=2)
    s = h.settings(namespace, mode="evict")
    wait_hot(h, s, {a}, {h.nodes[3]})
    rb = rebalancer(h, s)
    got = rb.run_once()
    assert [o for _, o, _ in got.outcomes] == [actions.PDB]
    assert "disruption budget" in got.outcomes[0][2].lower()
    for p in pods:
        still = pod_json(h, namespace, p)
        assert still is not None and not still["metadata"].get("deletionTimestamp")
    assert wait_for(lambda: events(h, namespace, "RebalanceBlocked"), 10, "the RebalanceBlocked event")
    again = rb.run_once()  # the owner is cooling down: not asked again at every round
    assert not again.outcomes and again.plan is not None and again.plan.skipped["cooldown"] >= 1
    assert rb.metrics.registry.get_sample_value("drs_rebalance_evictions_total", {"outcome": "pdb"}) == 1


def test_daemonset_and_bare_pods_are_never_chosen(harness, namespace, clean):
    h = harness
    a = h.nodes[0]
    apps = client.AppsV1Api(h.api)
    core = client.CoreV1Api(h.api)
    ds_body = {
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    ds = apps.create_namespaced_daemon_set(namespace, ds_body)
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": ds.metadata.uid}
    core.create_namespaced_pod(namespace, pod_body("agent-x", a, {"app": "agent"}, owner))
    core.create_namespaced_pod(namespace, pod_body("lonely", a, {"app": "lonely"}))
    for p in ("agent-x", "lonely"):
        running(core, namespace, p)
        h.twin.add_pod(namespace, p, a, 2.8)
    replica_set(h, namespace, "small", [(a, 1.2)])
    s = h.settings(namespace, mode="evict")
    wait_hot(h, s, {a}, {h.nodes[3]})
    rb = rebalancer(h, s)
    got = rb.run_once()
    moved = [m.pod.key for m, _, _ in got.outcomes]
    assert f"{namespace}/agent-x" not in moved and f"{namespace}/lonely" not in moved
    assert moved == [f"{namespace}/small-0"]
    assert got.plan is not None and got.plan.skipped["daemonset"] == 1 and got.plan.skipped["no_controller"] == 1
    for p in ("agent-x", "lonely"):
        assert not pod_json(h, namespace, p)["metadata"].get("deletionTimestamp")


def test_budgets_and_cooldown_hold_under_a_burst_of_hot_nodes(harness, namespace, clean):
    h = harness
    hot = h.nodes[:3]
    for n in hot:
        h.twin.set_extra(n, 2.0)  # load nothing may move, beside two pods of two owners on each node
    placement = [(n, 2.6) for n in hot] + [(n, 2.4) for n in hot]
    replica_set(h, namespace, "burst-a", placement[:3])
    replica_set(h, namespace, "burst-b", placement[3:])
    s = h.settings(namespace, mode="evict", max_per_interval=2, max_per_node=1, max_per_namespace=5)
    wait_hot(h, s, set(hot), {h.nodes[3]})
    rb = rebalancer(h, s)
    got = rb.run_once()
    done = [m for m, o, _ in got.outcomes if o == actions.EVICTED]
    assert len(got.outcomes) == 2 and len(done) == 2  # the round's budget, though three nodes are hot
    assert len({m.source for m in done}) == 2 and len({m.pod.owner for m in done}) == 2  # one per node, per owner
    assert got.plan is not None and got.plan.skipped["budget_cluster"] >= 1
    again = rb.run_once()  # both owners cool down: nothing of theirs moves again
    assert not again.outcomes and again.plan is not None and again.plan.skipped["cooldown"] >= 1


def test_kube_schedulers_pods_on_a_node_hot_with_load_outside_them_are_not_moved_to_be_refilled(
    harness, namespace, clean
):
    """A node hot with a neighbour's load: kube-scheduler would send new pods to the requests a move frees, so only
    the pod that uses more per request than the cluster's pods moves; the two that use what they request stay, though
    the node is still hot after the first move and, without the rule, one of them is moved too."""
    h = harness
    a, b = h.nodes[0], h.nodes[1]
    h.twin.set_extra(a, 4.9)  # outside any pod
    steady = replica_set(h, namespace, "steady", [(a, 0.5), (a, 0.5)])  # their 500m requests
    calm = replica_set(h, namespace, "calm", [(b, 0.5), (b, 0.5)])
    surge = replica_set(h, namespace, "surge", [(a, 2.0)])  # four times its request
    s = h.settings(namespace, refill_aware=True)
    wait_hot(h, s, {a}, {h.nodes[3]})
    # the whole window at the node's full load (7.9 of 8 cores), so that it stays hot after the first move
    wait_for(lambda: shares(h, s)[a] > 0.95, 3 * WINDOW, f"{a}'s whole window at its full load")
    src = h.source(s)
    try:
        wait_for(
            lambda: all((namespace, p) in pod_usage(src, s) for p in steady + calm + surge),
            3 * WINDOW,
            "every pod's usage in the stored series",
        )
    finally:
        src.close()
    try:
        got = rebalancer(h, s).run_once()
        assert [(m.pod.key, o) for m, o, _ in got.outcomes] == [(f"{namespace}/surge-0", actions.DRY_RUN)]
        assert got.plan is not None and got.plan.skipped["refills"] == 2
        assert got.outcomes[0][0].source == a and got.outcomes[0][0].source_after >= s.rebalance.cool_below
        off = rebalancer(h, h.settings(namespace, refill_aware=False)).run_once()
        moved = [m.pod.key.split("/", 1)[1] for m, _, _ in off.outcomes]
        assert moved[0] == "surge-0" and len(moved) == 2 and moved[1] in steady
    finally:
        remove_workloads(h, namespace)


def remove_workloads(h: Harness, ns: str) -> None:
    """Delete the namespace's ReplicaSets and pods (bounded wait until gone): their requests would stay on the
    harness's nodes for the tests after, and the kube-scheduler test needs its hot node the emptiest by requests."""
    apps = client.AppsV1Api(h.api)
    core = client.CoreV1Api(h.api)
    apps.delete_collection_namespaced_replica_set(ns)
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(ns).items, 30, f"the pods of {ns} to be deleted")


def test_pod_usage_is_read_from_the_stored_series(harness, namespace, clean):
    h = harness
    replica_set(h, namespace, "usage", [(h.nodes[3], 1.5)])
    s = h.settings(namespace)
    src = h.source(s)
    try:
        got = wait_for(
            lambda: (u := pod_usage(src, s).get((namespace, "usage-0"))) is not None and u[0] > 1.3 and u.tolist(),
            3 * WINDOW,
            "the pod's usage in the stored series",
        )
    finally:
        src.close()
    assert got[0] == pytest.approx(1.5, rel=0.15) and got[1] == pytest.approx(2**30, rel=0.01)


KS = "rb-kube-scheduler"
"""The real kube-scheduler's profile in the test below: only its own pods, so no other test's pod is placed."""


def _replacement(h: Harness, ns: str, app: str, gone: set[str]) -> dict[str, Any] | None:
    core = client.CoreV1Api(h.api)
    pods = json.loads(core.list_namespaced_pod(ns, label_selector=f"app={app}", _preload_content=False).data)["items"]
    for p in pods:
        if (
            p["metadata"]["name"] not in gone
            and not p["metadata"].get("deletionTimestamp")
            and p["spec"].get("nodeName")
        ):
            return p
    return None


GATE = "drs.io/evicted-pod-gone"


def _ungate_once_gone(h: Harness, ns: str, app: str, gone: set[str]) -> None:
    """Let kube-scheduler see the replacement only once the evicted pods are deleted: its pod informer then has their
    deletion before the gate's removal (one watch, in order), so its cache no longer holds them when it scores (a
    terminating pod still counts for its node's requests and for the default spreading, which sends the replacement
    elsewhere; on a cluster a kubelet's graceful termination takes that long)."""
    core = client.CoreV1Api(h.api)
    wait_for(lambda: all(pod_json(h, ns, p) is None for p in gone), 60, "the evicted pod to be deleted")

    def gated() -> str | None:
        pods = json.loads(core.list_namespaced_pod(ns, label_selector=f"app={app}", _preload_content=False).data)
        return next((p["metadata"]["name"] for p in pods["items"] if p["spec"].get("schedulingGates")), None)

    name = wait_for(gated, 60, "the ReplicaSet's gated replacement")
    core.patch_namespaced_pod(name, ns, [{"op": "remove", "path": "/spec/schedulingGates"}])


def test_kube_scheduler_puts_a_replacement_back_on_the_hot_node_unless_it_is_tainted(
    harness, namespace, clean, control_plane
):
    """Measured on the real kube-scheduler: it scores by requests, and once the pod is evicted its node has the most
    room, so the replacement lands back on the hot node; with the rebalancer's PreferNoSchedule taint it goes
    elsewhere."""
    h = harness
    a, others = h.nodes[0], h.nodes[1:]
    core = client.CoreV1Api(h.api)
    apps = client.AppsV1Api(h.api)
    for i, n in enumerate(others):  # requests fill the cool nodes (they use nothing): kube-scheduler sees them full
        body = pod_body(f"filler-{i}", n, {"app": "filler"})
        body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
        core.create_namespaced_pod(namespace, body)
        running(core, namespace, f"filler-{i}")
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "schedulerName": KS,
            "nodeSelector": {LABEL: "yes"},
            "terminationGracePeriodSeconds": 0,
            "schedulingGates": [{"name": GATE}],
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "3"}}}
            ],
        },
    }
    first = pod_body("web-0", a, {"app": "web"}, schedulerName=KS)
    first["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    core.create_namespaced_pod(namespace, first)
    running(core, namespace, "web-0")
    rs = {"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}}}
    rs["spec"]["template"] = template
    apps.create_namespaced_replica_set(namespace, rs)
    h.twin.set_extra(a, 3.5)  # load nothing may move (another tenant's), beside the pod
    h.twin.add_pod(namespace, "web-0", a, 3.5)
    scheduler = control_plane.start_kube_scheduler(f"profiles: [{{schedulerName: {KS}}}]")
    try:
        s = h.settings(namespace, mode="evict")
        wait_hot(h, s, {a}, {h.nodes[3]})
        got = rebalancer(h, s).run_once()  # least-loaded predicts a cool node; kube-scheduler decides
        assert [(m.pod.key, o) for m, o, _ in got.outcomes] == [(f"{namespace}/web-0", actions.EVICTED)]
        _ungate_once_gone(h, namespace, "web", {"web-0"})
        back = wait_for(
            lambda: _replacement(h, namespace, "web", {"web-0"}), 60, "kube-scheduler to bind the replacement"
        )
        assert back["spec"]["nodeName"] == a  # landed back on the hot node
        name = back["metadata"]["name"]
        running(core, namespace, name)
        h.twin.remove_pod("web-0")
        h.twin.add_pod(namespace, name, a, 3.5)
        wait_hot(h, s, {a}, {h.nodes[3]})
        src = h.source(s)
        try:  # the replacement's own series: its usage is what the plan moves
            wait_for(
                lambda: (u := pod_usage(src, s).get((namespace, name))) is not None and u[0] > 3.0,
                3 * WINDOW,
                "the replacement's stored usage",
            )
        finally:
            src.close()
        tainting = h.settings(namespace, mode="evict", taint_hot_nodes=True)
        got = rebalancer(h, tainting).run_once()
        assert [o for _, o, _ in got.outcomes] == [actions.EVICTED], got.plan
        node = json.loads(core.read_node(a, _preload_content=False).data)
        assert {"key": "drs.io/hot", "value": "true", "effect": "PreferNoSchedule"} in node["spec"]["taints"]
        _ungate_once_gone(h, namespace, "web", {"web-0", name})
        moved = wait_for(
            lambda: _replacement(h, namespace, "web", {"web-0", name}), 60, "kube-scheduler to bind the next one"
        )
        assert moved["spec"]["nodeName"] in others  # the taint sent it elsewhere
    finally:
        scheduler.stop()
        if scheduler in control_plane.schedulers:
            control_plane.schedulers.remove(scheduler)
        actions.sync_taints(h.api, "drs.io/hot", (), h.nodes)


@pytest.fixture(scope="module")
def descheduler_bin():
    """kubernetes-sigs/descheduler built from the Go module proxy (once; a no-op afterwards)."""
    try:
        return build_descheduler()
    except ControlPlaneError as e:
        pytest.fail(f"the descheduler is unavailable: {e}", pytrace=False)


def descheduler_rounds(h: Harness, control_plane, binary, ns: str, settings, workdir, until, what: str) -> str:
    """The real descheduler (LowNodeUtilization on the stored series, the rebalancer's thresholds and budgets) on the
    harness's nodes, a round every 2 s, until ``until(log)`` holds (bounded); returns its log.

    Rounds, not one: its Prometheus client is made by a Secret reconciler that starts beside the first round, so a
    single round (``--descheduling-interval 0``) may run before it has a client and end without looking."""
    core = client.CoreV1Api(h.api)
    core.create_namespaced_secret(ns, token_secret(ns, "descheduler-prometheus"))
    query = utilisation_query(settings.rebalance.window)
    policy = low_node_utilization_policy(
        settings.rebalance, h.prometheus.url, query, (ns, "descheduler-prometheus"), node_selector=f"{LABEL}=yes"
    )
    ca = control_plane.ca_file.read_bytes()
    proc = start_descheduler(binary, workdir, control_plane.admin_kubeconfig, ca, policy, interval_seconds=2)
    try:
        wait_for(lambda: proc.alive() and until(proc.log_tail(2000)), 120, what)
    finally:
        proc.stop()
    return proc.log_tail(2000)


ROUND = re.compile(r'"Number of evictions/requests" totalEvicted=(\d+)')


def evicted(h: Harness, ns: str, names: list[str]) -> list[str]:
    out = []
    for p in names:
        got = pod_json(h, ns, p)
        if got is None or got["metadata"].get("deletionTimestamp"):
            out.append(p)
    return out


def test_the_real_descheduler_reads_the_stored_series_and_evicts_from_the_hot_node_within_its_budget(
    harness, namespace, clean, control_plane, descheduler_bin, tmp_path
):
    h = harness
    a, b = h.nodes[0], h.nodes[1]
    hot = replica_set(h, namespace, "load", [(a, 2.4), (a, 2.4), (a, 2.4)])
    calm = replica_set(h, namespace, "calm", [(b, 0.5)])
    s = h.settings(namespace, mode="evict", max_per_node=1)
    wait_hot(h, s, {a}, {h.nodes[3]})
    # What the descheduler is given is what the rebalancer reads: each node's share, under its name.
    seen = {r["metric"]["instance"]: float(r["value"][1]) for r in h.prometheus.query(utilisation_query("20s"))}
    assert set(h.nodes) <= set(seen) and seen[a] > 0.8 and all(seen[n] < 0.7 for n in h.nodes[1:])
    log = descheduler_rounds(
        h, control_plane, descheduler_bin, namespace, s, tmp_path,
        lambda _: evicted(h, namespace, hot), "the descheduler to evict from the hot node",
    )  # fmt: skip
    rounds = [int(n) for n in ROUND.findall(log)]
    assert rounds and max(rounds) <= 1, log  # its per-node budget, one hot node: at most one eviction per round
    assert not evicted(h, namespace, calm)
    assert "overutilized" in log.lower()


def test_the_real_descheduler_meets_the_same_disruption_budget(
    harness, namespace, clean, control_plane, descheduler_bin, tmp_path
):
    h = harness
    a = h.nodes[2]
    pods = replica_set(h, namespace, "kept", [(a, 3.0), (a, 3.5)], budget=2)
    s = h.settings(namespace, mode="evict")
    wait_hot(h, s, {a}, {h.nodes[3]})
    descheduler_rounds(
        h, control_plane, descheduler_bin, namespace, s, tmp_path,
        lambda log: "disruption budget" in log.lower(), "the descheduler to try and meet the budget",
    )  # fmt: skip
    assert not evicted(h, namespace, pods)
