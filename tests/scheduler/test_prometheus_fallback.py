"""The shipped DQN model deciding on node state from a real Prometheus scraping real
exporters (one per fake node, each labelled with that node's name), over feasible nodes
only; killing Prometheus mid-run switches every decision to the request-based fallback,
counted by reason, and binding carries on."""

from __future__ import annotations

import pytest

from tests.prom.fixtures import start_drs_exporter, start_prometheus, wait_until
from tests.scheduler.conftest import journalled, list_pods, pod_body, scheduled_message
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

NODES = ("pm-a", "pm-b", "pm-c")


@pytest.fixture
def exporters(tmp_path):
    started = []
    try:
        for name in NODES:
            started.append(start_drs_exporter(tmp_path, node_name=name))
        yield started
    finally:
        for e in started:
            e.stop()


def test_prometheus_killed_mid_run_switches_to_fallback(core, ns, fake_nodes, make_scheduler, exporters, tmp_path):
    from drs_prom.agent import load_policy
    from drs_prom.config import PrometheusSettings
    from drs_prom.signals.prometheus import PrometheusSource

    for name in NODES:
        fake_nodes(name, cpu="8", memory="16Gi")
    # infeasible (tainted) and without any metrics: must neither be chosen nor force the fallback
    fake_nodes("pm-tainted", cpu="64", memory="256Gi", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    prom = start_prometheus(tmp_path / "prom", scrape_targets=[e.target for e in exporters], scrape_interval="1s")
    try:
        source = PrometheusSource(
            PrometheusSettings(url=prom.url, window="5s", max_sample_age_seconds=10, timeout_seconds=1),
            expected_nodes=lambda: (*NODES, "pm-tainted"),
        )
        wait_until(
            lambda: (s := source.snapshot()).stale == {"pm-tainted"} and len(s.fresh()) == 3,
            30,
            "fresh metrics for the 3 exporter nodes",
        )
        model = load_policy(None, 5.0)  # the shipped model (models/drs-v7.keras), on this source's 5 s window
        sched = make_scheduler(source=source, policy=model)

        def fallback(reason: str) -> float:
            return sched.metrics.registry.get_sample_value("drs_fallback_decisions_total", {"reason": reason}) or 0.0

        for i in range(10):
            core.create_namespaced_pod(ns, pod_body(f"before{i}"), _preload_content=False)
        wait_for(
            lambda: sum(1 for p in list_pods(core, ns) if p["spec"].get("nodeName")) == 10, 30, "10 bound with metrics"
        )
        assert fallback("prometheus_unreachable") == 0 and fallback("metrics_stale") == 0
        before = journalled(sched, 10)
        assert {(r.policy, r.fallback_reason, r.model_version) for r in before} == {(model.name, None, model.version)}
        assert {r.chosen for r in before} <= set(NODES)
        assert all(r.feasible == [c != "pm-tainted" for c in r.candidates] for r in before)
        assert all(r.scores[r.candidates.index("pm-tainted")] is None for r in before)  # never scored as an option
        assert f"by {model.name}; top Q-values: " in scheduled_message(core, ns, "before0")

        prom.stop()  # Prometheus dies mid-run
        wait_for(
            lambda: (sched.metrics.registry.get_sample_value("drs_prometheus_errors_total") or 0) > 0,
            15,
            "a failed state refresh",
        )
        for i in range(10):
            core.create_namespaced_pod(ns, pod_body(f"after{i}"), _preload_content=False)
        wait_for(
            lambda: all(p["spec"].get("nodeName") for p in list_pods(core, ns)) and len(list_pods(core, ns)) == 20,
            30,
            "all 20 bound after Prometheus died",
        )
        assert fallback("prometheus_unreachable") == 10
        after = journalled(sched, 10, lambda r: r.pod_name.startswith("after"))
        assert {(r.policy, r.fallback_reason) for r in after} == {("kube-default", "prometheus_unreachable")}
        assert {r.chosen for r in after} <= set(NODES)
        assert sched.ready()  # still healthy and serving
        source.close()
    finally:
        prom.stop()
