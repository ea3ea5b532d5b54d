"""Rebalancers in the closed loop, on real parts: a run named ``<scheduler>+rebalance`` starts ``drs-prom rebalance``
beside the real kube-scheduler, ``+descheduler`` the real kubernetes-sigs descheduler, both on the run's Prometheus
and the scenario's settings scaled to the run's clock; an evicted pod is replaced as its controller would replace it
(its work left plus the restart penalty) and counted once, from its first creation.

The eviction here is made by the test through the real Eviction API (what both rebalancers call), so that the test
knows there is exactly one; whether a rebalancer finds a node hot is what `drs-prom testbed` measures, not this."""

from __future__ import annotations

import time
from typing import Any

import pytest

from drs_prom.sim.scenario import Scenario, load_scenario
from drs_prom.testbed import closed_loop
from drs_prom.testbed.closed_loop import RunConfig, RunContext, workload_for
from drs_prom.testbed.process import live_processes

pytestmark = pytest.mark.integration

PODS = 12


def short_drifting() -> Scenario:
    """drift-steps with pods that live minutes, not hours: the same owners, restarts and usage steps."""
    sc = load_scenario("drift-steps")
    profiles = sc.model_dump()["profiles"]
    for p in profiles.values():
        p["work_seconds"] = min(p["work_seconds"], 900)
    return sc.with_changes(profiles=profiles)


def evict_one(ctx: RunContext) -> dict[str, Any]:
    """Evict a running pod a ReplicaSet owns, through the Eviction API, as its Deployment's budget allows: a refusal
    (429: the budget would be broken) is counted and the next pod, or the same later, tried (bounded wait)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(ctx.testbed.api)
    rows = ctx.owners.rows()
    st = ctx.kubelet.stats
    refused = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        running = [n for n in list(st.started) if n in rows and ctx.owners.of(rows[n]).kind and n not in st.finished]
        for name in running:
            body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ctx.namespace))
            try:
                core.create_namespaced_pod_eviction(name, ctx.namespace, body)
            except ApiException as exc:
                if exc.status != 429:
                    raise
                refused += 1
                continue
            return {"evicted": name, "refused": refused}
        time.sleep(0.2)
    raise AssertionError(f"no pod of a ReplicaSet could be evicted within 120 s ({refused} refusals)")


def evict_within_budgets(ctx: RunContext) -> dict[str, Any]:
    return {**evict_one(ctx), "budgets": budgets_observed(ctx)}


def budgets_observed(ctx: RunContext) -> dict[str, Any]:
    """The run's PodDisruptionBudgets as the real disruption controller reports them, once it has (bounded)."""
    from kubernetes import client

    policy = client.PolicyV1Api(ctx.testbed.api)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        items = policy.list_namespaced_pod_disruption_budget(ctx.namespace).items
        if items and all(b.status and b.status.observed_generation == b.metadata.generation for b in items):
            return {b.metadata.name: (b.spec.min_available, b.status.expected_pods) for b in items}
        time.sleep(0.2)
    raise AssertionError("the disruption controller never reported the run's budgets")


def test_rebalancers_run_beside_the_scheduler_and_an_evicted_pod_is_replaced_and_counted_once(k8s_bins, tmp_path):
    running = live_processes()
    sc = short_drifting()
    wl = workload_for(sc, 0, PODS)
    cfg = RunConfig(speed=20.0, scrape_seconds=0.5)
    work = tmp_path / "work"
    with closed_loop.Testbed(sc, work, cfg, progress=lambda _: None) as tb:
        moved = tb.run_one("kube-scheduler+rebalance", 0, wl, fault_script=evict_within_budgets)
        shadow = tb.run_one("kube-scheduler+descheduler", 0, wl)
    evicted = moved["faults"]["evicted"]
    assert (
        moved["rebalancer"] == "rebalance" and moved["evictions"] >= 1 and moved["replacements"] == moved["evictions"]
    )
    assert (moved["lost"], moved["completed"], moved["bound"]) == (0, PODS, PODS), moved["lost_pods"]
    assert moved["evictions_per_node_hour"] > 0
    assert evicted not in moved["lost_pods"]
    # every Deployment of two pods or more has a budget of one pod down, kept by the real disruption controller
    # (expected pods: those the driver had created when it looked), and no eviction left one short
    budgets = moved["faults"]["budgets"]
    assert moved["disruption_budgets"] == len(budgets) == 5 and moved["pdb_violations"] == 0
    assert all(0 <= expected <= low + 1 for low, expected in budgets.values()), budgets
    # drs-prom rebalance ran its rounds on the run's series (every 60 s of the scenario's clock: 3 s at 20x), and
    # the descheduler classified the nodes from its query (a round whose query missed a node logs no such line)
    rebalance_log = (work / moved["namespace"] / "drs-rebalance.log").read_text()
    assert "mode evict, every 3s" in rebalance_log and rebalance_log.count("round:") >= 3
    descheduler_log = (work / shadow["namespace"] / "descheduler.log").read_text()
    assert shadow["rebalancer"] == "descheduler" and "Number of underutilized nodes" in descheduler_log
    assert (shadow["lost"], shadow["completed"]) == (0, PODS)
    assert shadow["evictions"] == shadow["replacements"]
    assert live_processes() == running  # everything the runs started is stopped
