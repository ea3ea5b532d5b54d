"""The live scheduler tells its policy what a Deployment's new pods will use, from the pods it ran before.

A real kube-apiserver and kube-controller-manager: a ReplicaSet named and labelled as the Deployment controller
names its ReplicaSets makes the pods (the real ReplicaSet controller names them); a real Prometheus holds two
hours of the Deployment's earlier pods as cAdvisor series (backfilled, with the per-pod rules' series over them).
The first pods are decided at once on their requests while the history is read off the scheduling thread; once
it is read, new pods carry the owner's stored usage. The journal keeps each decision's demand, its source and the
top owner; drs_usage_estimates_total counts the sources.
"""

from __future__ import annotations

import math
import time

import pytest
from kubernetes import client

from drs_prom.config import PrometheusSettings, UsageSettings
from drs_prom.scheduler.decision.pod_demand import DemandResolver
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.signals.pod_usage import PrometheusUsageHistory
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.usage.estimator import UsageModel
from tests.prom.cadvisor_backfill import StoredPod, backfilled_prometheus
from tests.scheduler.conftest import journalled
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

HASH = "7d9f8c6b5"
USAGE = (0.4, 300 * 2**20, 80e3, 40e3, 2e6, 5e6)  # what each earlier pod used: cores, bytes, bytes/s


def _replica_set(replicas: int) -> dict:
    labels = {"app": "web", "pod-template-hash": HASH}
    container = {
        "name": "app",
        "image": "shop:1.2",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    return {
        "metadata": {"name": f"web-{HASH}", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"schedulerName": "drs-scheduler", "containers": [container]},
            },
        },
    }


def test_a_deployments_new_pods_carry_its_stored_usage(
    control_plane, controller_manager, core, ns, fake_nodes, make_scheduler, tmp_path
):
    start = math.floor((time.time() - 3 * 3600) / 15) * 15
    earlier = [
        StoredPod(f"web-5c8d7b9f4-{s}", "docker.io/library/shop:1.2", start, start + 7200, USAGE, namespace=ns)
        for s in ("bq2xk", "m7wzt", "x2k4p")
    ]
    prom, _ = backfilled_prometheus(tmp_path / "prom", earlier)
    try:
        for name in ("pu-a", "pu-b"):
            fake_nodes(name, cpu="16", memory="64Gi")
        metrics = SchedulerMetrics()
        usage = UsageSettings()
        source = PrometheusSource(PrometheusSettings(url=prom.url, timeout_seconds=10))
        history = PrometheusUsageHistory(source, usage, registry=metrics.registry)
        exact = UsageModel(prior_pods=0.0)  # the stored pods' mean, nothing of the requests
        demands = DemandResolver(usage, history, registry=metrics.registry, model=exact)
        sched = make_scheduler(metrics=metrics, demands=demands)
        apps = client.AppsV1Api(control_plane.admin_client)
        apps.create_namespaced_replica_set(ns, _replica_set(2))
        first = journalled(sched, 2)
        assert {r.owner for r in first} == {"Deployment/web"}  # a ReplicaSet pod with the hash label
        assert all(r.pod_name.startswith(f"web-{HASH}-") for r in first)
        wait_for(lambda: (u := history.owner(ns, "Deployment/web", 0.0)) is not None and len(u) == 3, 30, "the read")
        apps.patch_namespaced_replica_set(f"web-{HASH}", ns, {"spec": {"replicas": 5}})
        rows = journalled(sched, 5)
        later = [r for r in rows if r.demand_source == "owner"]
        assert len(later) >= 3, [(r.pod_name, r.demand_source) for r in rows]
        for r in later:
            assert all(math.isclose(a, b, rel_tol=1e-3) for a, b in zip(r.pod_features, USAGE)), r.pod_features
            assert r.owner == "Deployment/web" and r.pod_cpu_m == 1000
        assert {r.demand_source for r in rows} <= {"requests", "owner"}  # the first ones: before the read
        for source in ("owner", "requests"):
            counted = metrics.registry.get_sample_value("drs_usage_estimates_total", {"source": source}) or 0.0
            assert counted >= sum(1 for r in rows if r.demand_source == source), source
    finally:
        prom.stop()
