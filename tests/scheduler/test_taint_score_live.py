"""PreferNoSchedule on real parts: the real kube-scheduler and drs-prom's scheduler choose the same node.

Two fake nodes of one test label: the emptier carries a PreferNoSchedule taint, the other is half full by requests.
kube-scheduler's resource scores prefer the emptier node and its TaintToleration score (weight 3) the other; a pod
that does not tolerate the taint goes to the half-full node, a pod that tolerates it to the emptier one. drs-prom's
scheduler (here on its fallback, kube-default, as no metrics are served) must bind the same pods to the same
nodes."""

from __future__ import annotations

import pytest

from tests.scheduler.conftest import list_pods, pod_body
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

TAINT = {"key": "drain-soon", "value": "true", "effect": "PreferNoSchedule"}
TOLERATION = {"key": "drain-soon", "operator": "Exists"}


def test_both_schedulers_keep_off_a_prefer_no_schedule_node_unless_the_pod_tolerates_it(
    core, ns, fake_nodes, make_scheduler, control_plane
):
    label = {"taint-test": ns}
    soft = fake_nodes(f"{ns}-soft", cpu="16", memory="64Gi", labels=label, taints=[TAINT])
    busy = fake_nodes(f"{ns}-busy", cpu="16", memory="64Gi", labels=label)
    core.create_namespaced_pod(ns, pod_body("filler", cpu="8", nodeName=busy), _preload_content=False)
    kube_name = f"kube-{ns}"
    kube = control_plane.start_kube_scheduler(f"profiles: [{{schedulerName: {kube_name}}}]")
    try:
        make_scheduler()
        for who, scheduler in (("kube", kube_name), ("drs", "drs-scheduler")):
            core.create_namespaced_pod(
                ns, pod_body(f"{who}-plain", scheduler=scheduler, nodeSelector=label), _preload_content=False
            )
            tolerant = pod_body(f"{who}-tolerant", scheduler=scheduler, nodeSelector=label, tolerations=[TOLERATION])
            core.create_namespaced_pod(ns, tolerant, _preload_content=False)
        names = {f"{w}-{k}" for w in ("kube", "drs") for k in ("plain", "tolerant")}

        def placed() -> dict | None:
            got = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in list_pods(core, ns)}
            return got if all(got.get(n) for n in names) else None

        got = wait_for(placed, 60, "both schedulers to bind their pods")
    finally:
        kube.stop()
    assert (got["kube-plain"], got["kube-tolerant"]) == (busy, soft)  # the real kube-scheduler's answer
    assert (got["drs-plain"], got["drs-tolerant"]) == (busy, soft)
