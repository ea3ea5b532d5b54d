"""The rebalancer's harness: a real kube-apiserver and kube-controller-manager (disruption and ReplicaSet
controllers), four fake nodes whose load ``MetricsTwin`` serves, and a real Prometheus scraping it with the per-pod
recording rules; all on loopback, all stopped after the module."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from drs_prom.config import Settings, load_settings
from drs_prom.moves.hot import bottlenecks, capacity_shares
from drs_prom.rebalance.cluster import read_cluster
from drs_prom.rebalance.loop import Rebalancer
from drs_prom.rebalance.metrics import RebalanceMetrics
from drs_prom.rebalance.reads import node_quantiles
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.signals import promql
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.stores.journal import Journal
from drs_prom.testbed.prom_server import PrometheusProc, start_prometheus
from tests.rebalance.twin import CPUS, MetricsTwin
from tests.waiting import wait_for

WINDOW = 20.0
"""The harness's window (seconds): Harness.settings."""
LABEL = "drs.io/rebalance-harness"
"""On the harness's nodes; every pod of the tests selects it, so no other test's node is a target."""


@dataclass
class Harness:
    nodes: list[str]
    twin: MetricsTwin
    prometheus: PrometheusProc
    api: Any

    def settings(self, namespace: str, **rebalance: Any) -> Settings:
        """Settings on the harness's time scale: a 20 s window of 1 s samples, this test's namespace only. The
        harness's pods request 500m and use several cores, so the refill rule (drs_prom.moves.refill) is off unless a
        test asks for it: the test of that rule sets its pods' usage against their requests."""
        base = {"window": "20s", "step": "1s", "min_age_seconds": 60, "namespaces": [namespace], "refill_aware": False}
        base["guardrails"] = {"enabled": False}
        prometheus = {"url": self.prometheus.url, "window": "10s", "max_sample_age_seconds": 30}
        return Settings.model_validate({"prometheus": prometheus, "rebalance": base | rebalance})

    def source(self, settings: Settings) -> PrometheusSource:
        return PrometheusSource(settings.prometheus)


@pytest.fixture(scope="module")
def harness(control_plane, controller_manager, tmp_path_factory) -> Iterator[Harness]:
    from kubernetes import client

    tag = uuid.uuid4().hex[:5]
    nodes = [f"rb-{tag}-{i}" for i in range(4)]
    core = client.CoreV1Api(control_plane.admin_client)
    for n in nodes:
        control_plane.create_fake_node(n, cpu=str(CPUS), memory="32Gi", labels={LABEL: "yes"})
    twin = MetricsTwin(nodes).start()
    for n in nodes:
        twin.set_extra(n, 0.2)
    tmp = tmp_path_factory.mktemp("rebalance-prom")
    rules = tmp / "pod-usage.rules.yml"
    usage = load_settings().usage
    group = {
        "name": "drs-pod-usage",
        "interval": "1s",
        "rules": promql.pod_usage_rules(usage.rate_window, usage.cadvisor_selector),
    }
    rules.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    prom = None
    try:
        prom = start_prometheus(Path(tmp), extra_config={"scrape_configs": twin.scrape_configs()}, rule_files=[rules])
        wait_for(lambda: len(prom.query('up{job="node"} == 1')) == len(nodes), 30, "Prometheus to scrape the twin")
        yield Harness(nodes, twin, prom, control_plane.admin_client)
    finally:
        if prom is not None:
            prom.stop()
        twin.stop()
        for n in nodes:
            try:
                core.delete_node(n)
            except client.ApiException:
                pass


@pytest.fixture
def namespace(control_plane) -> str:
    ns = f"rb-{uuid.uuid4().hex[:6]}"
    control_plane.create_namespace(ns)
    return ns


def started(seconds_ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


def running(core: Any, ns: str, name: str, seconds_ago: float = 3600) -> None:
    """Report the pod running and ready since ``seconds_ago``, as its kubelet would."""
    since = started(seconds_ago)
    status = {
        "phase": "Running",
        "startTime": since,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}],
    }
    core.patch_namespaced_pod_status(name, ns, {"status": status})


def pod_body(name: str, node: str, labels: dict[str, str], owner: dict[str, Any] | None = None, **spec: Any) -> dict:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner | {"controller": True, "blockOwnerDeletion": True}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "nodeSelector": {LABEL: "yes"},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "500m"}}}
            ],
            **spec,
        },
    }


def shares(h: Harness, settings) -> dict[str, float]:
    """Each harness node's bottleneck share over the window, as the rebalancer reads it."""
    state = read_cluster(h.api, settings, 0.0)
    src = h.source(settings)
    try:
        raw = node_quantiles(src, settings, state.names)
    finally:
        src.close()
    peak = bottlenecks(capacity_shares(raw, state.link))
    return {n: float(p) for n, p in zip(state.names, peak) if n in h.nodes}


def wait_hot(h: Harness, settings, hot: set[str], cool: set[str] = frozenset()) -> None:
    """Until the window shows ``hot`` above hot_above and ``cool`` below cool_below (bounded)."""
    r = settings.rebalance

    def ok() -> dict[str, float] | None:
        got = shares(h, settings)
        fine = all(got.get(n, 0) > r.hot_above for n in hot) and all(got.get(n, 1) < r.cool_below for n in cool)
        return got if fine else None

    wait_for(ok, 3 * WINDOW + 30, f"nodes {sorted(hot)} hot and {sorted(cool)} cool over the window")


@pytest.fixture
def clean(harness):
    """Each test starts on nodes whose whole window reads cool, and leaves the twin as it found it."""
    wait_cool(harness)
    yield
    for name in list(harness.twin.pods):
        harness.twin.remove_pod(name)
    for n in harness.nodes:
        harness.twin.set_extra(n, 0.2)


def wait_cool(h: Harness) -> None:
    """Until every harness node's window reads below 0.1 (after Prometheus starts, the first rate window of a new
    series reads high: rate() extrapolates over its start)."""
    s = h.settings("default")
    wait_for(lambda: all(v < 0.1 for v in shares(h, s).values()), 3 * WINDOW + 30, "the harness's nodes to read cool")


def pod_json(h: Harness, ns: str, name: str) -> dict[str, Any] | None:
    core = client.CoreV1Api(h.api)
    try:
        return json.loads(core.read_namespaced_pod(name, ns, _preload_content=False).data)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def rebalancer(h: Harness, settings: Settings, journal: Journal | None = None, clock: Any = time.time) -> Rebalancer:
    """Replacements predicted by least-loaded (deterministic: kube-default breaks ties at random, as kube-scheduler)."""
    policy = make_policy("least-loaded", PolicySpec.from_settings(settings))
    metrics = RebalanceMetrics()
    return Rebalancer(settings, h.api, h.source(settings), metrics, journal, clock, own=policy, other=policy)
