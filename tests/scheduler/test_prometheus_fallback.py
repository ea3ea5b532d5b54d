"""Node state from a real Prometheus scraping real exporters (one per fake node, each
labelled with that node's name); killing Prometheus mid-run switches every decision to
the request-based fallback, counted by reason, and binding carries on."""

from __future__ import annotations

import pytest

from tests.prom.fixtures import start_drs_exporter, start_prometheus, wait_until
from tests.scheduler.conftest import list_pods, pod_body, wait_for

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
    from drs_prom.baselines import make_policy
    from drs_prom.config import PrometheusSettings
    from drs_prom.prometheus import PrometheusSource

    for name in NODES:
        fake_nodes(name, cpu="8", memory="16Gi")
    prom = start_prometheus(tmp_path / "prom", scrape_targets=[e.target for e in exporters], scrape_interval="1s")
    try:
        source = PrometheusSource(PrometheusSettings(url=prom.url, window="5s", max_sample_age_seconds=10, timeout_seconds=1),
                                  expected_nodes=lambda: NODES)
        wait_until(lambda: not (s := source.snapshot()).stale and len(s.features) == 3, 30, "fresh metrics for 3 nodes")
        # The model slot holds a real metrics-driven policy (the trained model has its own tests).
        sched = make_scheduler(source=source, policy=make_policy("balanced-load"))
        fallback = lambda reason: sched.metrics.registry.get_sample_value(  # noqa: E731
            "drs_fallback_decisions_total", {"reason": reason}) or 0.0

        for i in range(10):
            core.create_namespaced_pod(ns, pod_body(f"before{i}"), _preload_content=False)
        wait_for(lambda: sum(1 for p in list_pods(core, ns) if p["spec"].get("nodeName")) == 10, 30, "10 bound with metrics")
        assert fallback("prometheus_unreachable") == 0 and fallback("metrics_stale") == 0
        before = list(sched.journal.since(0))
        assert {(r.policy, r.fallback_reason) for r in before} == {("balanced-load", None)}

        prom.stop()  # Prometheus dies mid-run
        wait_for(lambda: (sched.metrics.registry.get_sample_value("drs_prometheus_errors_total") or 0) > 0, 15,
                 "a failed state refresh")
        for i in range(10):
            core.create_namespaced_pod(ns, pod_body(f"after{i}"), _preload_content=False)
        wait_for(lambda: all(p["spec"].get("nodeName") for p in list_pods(core, ns)) and len(list_pods(core, ns)) == 20,
                 30, "all 20 bound after Prometheus died")
        assert fallback("prometheus_unreachable") == 10
        after = [r for r in sched.journal.since(0) if r.pod_name.startswith("after")]
        assert {(r.policy, r.fallback_reason) for r in after} == {("kube-default", "prometheus_unreachable")}
        assert sched.ready()  # still healthy and serving
        source.close()
    finally:
        prom.stop()
