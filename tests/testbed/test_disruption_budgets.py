"""The PodDisruptionBudgets a testbed run with a rebalancer gets (one per Deployment of two pods or more: at most one
pod down), and the check that counts an eviction leaving its Deployment short of its budget."""

from __future__ import annotations

from drs_prom.testbed.disruption_budgets import Budget, broken, budgets
from drs_prom.testbed.driver import RUN_LABEL
from drs_prom.testbed.pod_owners import TEMPLATE_HASH_LABEL, Controller, PodOwners
from drs_prom.testbed.replacements import Eviction

WEB = Controller("Deployment/web", "ReplicaSet", "apps/v1", "web-abc", "img", {TEMPLATE_HASH_LABEL: "abc"})
ONE = Controller("Deployment/one", "ReplicaSet", "apps/v1", "one-xyz", "img", {TEMPLATE_HASH_LABEL: "xyz"})
JOB = Controller("Job/batch", "Job", "batch/v1", "batch", "img")
BARE = Controller("Pod/solo", "", "", "solo", "img")
OWNERS = PodOwners(
    (WEB, ONE, JOB, BARE),
    (0, 0, 0, 1, 2, 2, 3),
    ("web-abc-aaaaa", "web-abc-bbbbb", "web-abc-ccccc", "one-xyz-ddddd", "batch-eeeee", "batch-fffff", "solo"),
)


def test_one_budget_per_deployment_of_two_pods_or_more_allowing_one_down():
    made = budgets(OWNERS, "tb1")
    assert made == [Budget(0, "web-abc", 2, {RUN_LABEL: "tb1", TEMPLATE_HASH_LABEL: "abc"})]
    m = made[0].manifest("tb1", "tb1")
    assert (m["apiVersion"], m["kind"], m["metadata"]["namespace"]) == ("policy/v1", "PodDisruptionBudget", "tb1")
    # minAvailable, not maxUnavailable: the controller would need the stand-in ReplicaSet's scale for the latter
    assert m["spec"] == {"minAvailable": 2, "selector": {"matchLabels": {RUN_LABEL: "tb1", TEMPLATE_HASH_LABEL: "abc"}}}


def test_the_selector_matches_the_owners_pods_and_no_other_pod_of_the_run():
    from drs_prom.sim.scenario import load_scenario
    from drs_prom.testbed.closed_loop import workload_for
    from drs_prom.testbed.driver import pod_manifest
    from drs_prom.testbed.pod_owners import pod_owners

    wl = workload_for(load_scenario("drift-hetero"), 0, None)
    owners = pod_owners(wl)
    made = budgets(owners, "tb7")
    assert len(made) == 8  # four stream and four compute Deployments; the batch Jobs get none
    uids: dict[str, str] = {}
    for b in made:
        sel = b.selector.items()
        matched = [
            i
            for i in range(len(wl))
            if sel <= pod_manifest(wl, i, "tb7", "s", "tb7", uids, owners=owners)["metadata"]["labels"].items()
        ]
        assert matched == [i for i in range(len(wl)) if owners.owner[i] == b.owner]
        assert b.min_available == len(matched) - 1


def test_an_eviction_that_leaves_the_deployment_short_is_a_violation():
    made = budgets(OWNERS, "tb1")
    started = {"web-abc-aaaaa": 0.0, "web-abc-bbbbb": 1.0, "web-abc-ccccc": 2.0, "web-abc-r1": 12.0, "one-xyz-ddddd": 0}
    lineage = {"web-abc-r1": "web-abc-aaaaa"}
    # a at 10 (b and c run: 2 >= 2), its replacement runs at 12; b at 11, before it (only c runs: 1 < 2)
    ev = [Eviction("web-abc-aaaaa", 10.0, 5.0, "web-abc-r1"), Eviction("web-abc-bbbbb", 11.0, 5.0, None)]
    got = broken(made, OWNERS, lineage, ev, started, {})
    assert [(v.pod, v.running_after, v.min_available) for v in got] == [("web-abc-bbbbb", 1, 2)]
    # b evicted after the replacement ran: c and the replacement run
    ev[1] = Eviction("web-abc-bbbbb", 13.0, 5.0, None)
    assert broken(made, OWNERS, lineage, ev, started, {}) == []
    # ... unless c had finished by then
    assert len(broken(made, OWNERS, lineage, ev, started, {"web-abc-ccccc": 12.5})) == 1
    # a Deployment without a budget (one pod) is never short
    assert broken(made, OWNERS, {}, [Eviction("one-xyz-ddddd", 3.0, 1.0, None)], started, {}) == []
