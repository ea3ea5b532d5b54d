"""drs-prom as an HTTP extender of the real kube-scheduler (both nodeCacheCapable modes),
plus the verbs' JSON on literal ExtenderArgs."""

from __future__ import annotations

import json
import urllib.request

import pandas as pd
import pytest

from drs_prom.features import FEATURES
from drs_prom.signals.state import NodeSnapshot
from tests.scheduler.conftest import list_pods, pod_body
from tests.specs import SPEC
from tests.waiting import wait_for

NODES = ("ex-a", "ex-b", "ex-c")


class FixedSource:
    """A fixed NodeSnapshot: ex-b idle, the others busy, so the extender's preference is known
    in advance (the Prometheus path is tested against real Prometheus in test_prometheus_fallback)."""

    def snapshot(self) -> NodeSnapshot:
        import time

        frame = pd.DataFrame([[0.9] * 6, [0.05] * 6, [0.8] * 6], index=list(NODES), columns=list(FEATURES))
        frame.loc[:, ["net_rx", "net_tx", "disk_read", "disk_write"]] *= 1e8
        return NodeSnapshot(features=frame, taken_at=time.time())


def _extender(settings_overrides=None, cache=None, source=None):
    from drs_prom.config import load_settings
    from drs_prom.registry import make_policy
    from drs_prom.scheduler.decision.decide import Decider
    from drs_prom.scheduler.http.extender import Extender, ExtenderServer
    from drs_prom.scheduler.metrics import SchedulerMetrics

    settings = load_settings(None, settings_overrides or {})
    decider = Decider.from_settings(
        settings, SchedulerMetrics(), source=source, policy=make_policy("least-loaded", SPEC)
    )
    return ExtenderServer(Extender(decider, cache), "127.0.0.1:0"), decider


def node_json(name, cpu="4", taints=None):
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def post(port, verb, body):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/{verb}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def test_verbs_on_literal_extender_args():
    server, decider = _extender(source=FixedSource())
    decider.start()
    server.start()
    try:
        pod = pod_body("p", cpu="2")
        pod["metadata"]["namespace"] = "ns"
        nodes = {
            "items": [
                node_json("ex-a"),
                node_json("ex-b", cpu="1"),
                node_json("ex-c", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            ]
        }
        out = post(server.port, "filter", {"Pod": pod, "Nodes": nodes, "NodeNames": None})
        assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["ex-a"]
        assert out["FailedNodes"] == {"ex-b": "Insufficient cpu", "ex-c": "node(s) had untolerated taint {k: v}"}
        assert out["Error"] == "" and out["NodeNames"] is None
        prio = post(server.port, "prioritize", {"Pod": pod, "Nodes": nodes})
        scores = {h["Host"]: h["Score"] for h in prio}
        assert scores["ex-b"] == 10 and scores["ex-a"] == 0 and 0 < scores["ex-c"] < 10  # idle node best
        # names only without a cache: unresolvable nodes are reported, not silently passed
        out = post(server.port, "filter", {"Pod": pod, "NodeNames": ["ex-a"]})
        assert out["NodeNames"] == [] and "ex-a" in out["FailedNodes"]
    finally:
        server.stop()
        decider.stop()


def test_filter_verb_runs_the_full_chain_but_leaves_volumes_to_kube_scheduler():
    server, _ = _extender(source=FixedSource())
    server.start()
    try:
        gpu_node = node_json("ex-a")
        gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = "1"
        nodes = {"items": [gpu_node, node_json("ex-b")]}
        pod = pod_body("g")
        pod["metadata"]["namespace"] = "ns"
        pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        out = post(server.port, "filter", {"Pod": pod, "Nodes": nodes})
        assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["ex-a"]
        assert out["FailedNodes"] == {"ex-b": "Insufficient nvidia.com/gpu"}
        # kube-scheduler has run VolumeBinding before calling the extender: a claim is no reason to refuse
        pod = pod_body("v", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
        out = post(server.port, "filter", {"Pod": pod, "Nodes": nodes})
        assert len(out["Nodes"]["items"]) == 2 and out["FailedNodes"] == {}
    finally:
        server.stop()


@pytest.mark.integration
@pytest.mark.parametrize("node_cache_capable", [True, False])
def test_real_kube_scheduler_uses_the_extender(
    control_plane, core, ns, fake_nodes, drs_sa_kubeconfig, node_cache_capable
):
    from kubernetes import client as kclient

    from drs_prom.scheduler.watch.cache import ClusterCache

    for name in NODES:
        fake_nodes(name, cpu="8", memory="16Gi")
    cache = ClusterCache(scheduler_name="\0none")
    cache.start(kclient.CoreV1Api(control_plane.api_client(drs_sa_kubeconfig)))
    assert cache.wait_synced(30)
    server, decider = _extender(cache=cache, source=FixedSource())
    decider.start()
    server.start()
    try:
        sched_name = f"ext-{ns}"
        control_plane.start_kube_scheduler(f"""
profiles:
  - schedulerName: {sched_name}
extenders:
  - urlPrefix: http://127.0.0.1:{server.port}
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: 5
    nodeCacheCapable: {str(node_cache_capable).lower()}
    enableHTTPS: false
""")
        for i in range(8):
            core.create_namespaced_pod(ns, pod_body(f"e{i}", scheduler=sched_name), _preload_content=False)
        wait_for(
            lambda: (ps := list_pods(core, ns)) and all(p["spec"].get("nodeName") for p in ps) and len(ps) == 8,
            60,
            "kube-scheduler bound all 8 pods",
        )
        placed = {p["spec"]["nodeName"] for p in list_pods(core, ns) if p["spec"].get("nodeName")}
        assert placed == {"ex-b"}  # drs-prom's scores decided (kube-scheduler alone would spread them)
        reg = decider.metrics.registry
        assert reg.get_sample_value("drs_extender_requests_total", {"verb": "filter", "result": "ok"}) >= 8
        assert reg.get_sample_value("drs_extender_requests_total", {"verb": "prioritize", "result": "ok"}) >= 8
    finally:
        for p in list(control_plane.schedulers):
            p.stop()  # stays listed (the harness numbers scheduler dirs by list length); stop() is idempotent
        server.stop()
        decider.stop()
        cache.stop()
